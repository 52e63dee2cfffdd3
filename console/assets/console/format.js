// Formatting for display: one time format everywhere (relative, plus the
// absolute moment with its zone in the viewer's locale), humane durations,
// JSON, money and who did what.

const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

// STAMP_OPTIONS is the absolute format of every moment the console shows
// ("Nov 29, 2026, 2:03:04 PM UTC" in en-US; the viewer's own locale and
// zone elsewhere). The browser tests format their expectations with it.
export const STAMP_OPTIONS = {
  year: "numeric", month: "short", day: "numeric",
  hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "short",
};
const stampFormat = new Intl.DateTimeFormat(undefined, STAMP_OPTIONS);

// ago: "just now", "3 minutes ago", "in 2 hours". Each unit is used while
// the rounded number stays below the next ("in 1 hour", not "in 60
// minutes").
export function ago(iso, now = Date.now()) {
  if (!iso) return "—";
  const s = Math.round((new Date(iso).getTime() - now) / 1000);
  const abs = Math.abs(s);
  if (abs < 10) return "just now";
  if (abs < 60) return rtf.format(s, "second");
  if (Math.abs(Math.round(s / 60)) < 60) return rtf.format(Math.round(s / 60), "minute");
  if (Math.abs(Math.round(s / 3600)) < 48) return rtf.format(Math.round(s / 3600), "hour");
  return rtf.format(Math.round(s / 86400), "day");
}

// stamp: the absolute moment in the viewer's locale with the zone.
export function stamp(iso) {
  if (!iso) return "—";
  return stampFormat.format(new Date(iso));
}

// when: the relative time and the absolute moment, "3 minutes ago (Nov
// 29, 2026, 2:03:04 PM UTC)".
export function when(iso, now = Date.now()) {
  if (!iso) return "—";
  return `${ago(iso, now)} (${stamp(iso)})`;
}

// offset: how long after the start a moment was, "+1.2 s", for trace
// lines (their absolute moment is in the title).
export function offset(iso, startIso) {
  const ms = new Date(iso).getTime() - new Date(startIso).getTime();
  return (ms < 0 ? "−" : "+") + duration(Math.abs(ms));
}

// duration: humane, "850 ms", "4.2 s", "42 s", "15 min", "2 min 5 s",
// "1 h 30 min", "2 d 3 h" — never "15m0s" or "30000 ms".
export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "—";
  ms = Math.max(0, Math.round(ms));
  if (ms < 1000) return `${ms} ms`;
  if (ms < 10_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const parts = (big, bigUnit, small, smallUnit) => small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`;
  if (s < 3600) return parts(Math.floor(s / 60), "min", s % 60, "s");
  const m = Math.round(s / 60);
  if (m < 48 * 60) return parts(Math.floor(m / 60), "h", m % 60, "min");
  const h = Math.round(m / 60);
  return parts(Math.floor(h / 24), "d", h % 24, "h");
}

// goDuration reads a Go duration string ("15m0s", "1h30m", "500ms") as
// milliseconds; NaN when it is not one.
export function goDuration(s) {
  const units = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g;
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(String(s))) return s === "0" || s === "0s" ? 0 : NaN;
  let total = 0;
  for (const [, n, u] of String(s).matchAll(re)) total += Number(n) * units[u];
  return total;
}

// countdown: "4:59", "1:02:03", for a number of milliseconds left.
export function countdown(ms) {
  const t = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(t / 3600), m = Math.floor((t % 3600) / 60), s = t % 60;
  const p = (n) => String(n).padStart(2, "0");
  return h > 0 ? `${h}:${p(m)}:${p(s)}` : `${m}:${p(s)}`;
}

// pretty: indented JSON text of a value.
export function pretty(v) {
  if (v === undefined) return "";
  return JSON.stringify(v, null, 2);
}

export function bytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

export function usd(n) {
  return "$" + (n || 0).toFixed(n && n < 0.01 ? 6 : 4);
}

// hasCosts: whether a costs object holds any usage.
export function hasCosts(c) {
  return !!c && (c.tokensInput > 0 || c.tokensOutput > 0 || c.costUsd > 0);
}

export function costsText(c) {
  return `${c.tokensInput} tokens in, ${c.tokensOutput} tokens out, ${usd(c.costUsd)}`;
}

// who names a decider or actor: the member's name when known (with the key
// id), the signed-in key as "you", Stead itself for an expiry.
export function who(id, me, name) {
  if (!id) return "—";
  if (me && id === me.id) return `you (${name ? name + ", " : ""}${id})`;
  if (id === "stead") return "Stead (timeout)";
  return name ? `${name} (${id})` : id;
}
