// The customer status page, /status/{runId}#token=stc_…
//
// The customer token comes in the URL fragment, which the browser never
// sends to a server. It is moved to this tab's sessionStorage and removed
// from the address bar (so it does not linger in history or screenshots),
// and sent to the API only in the Authorization header, by embed.js.
//
// The page speaks for the project: its name, logo and accent colour come
// with the run (stead.json "branding", checked at deploy), and "This page
// updates by itself" shows only while the run can still change.

const runId = decodeURIComponent(location.pathname.replace(/^\/status\//, ""));
const storeKey = "stead.status." + runId;
const fragment = new URLSearchParams(location.hash.slice(1));
let token = fragment.get("token");
if (token) {
  sessionStorage.setItem(storeKey, token);
  history.replaceState(null, "", location.pathname + location.search);
} else {
  token = sessionStorage.getItem(storeKey);
}

const LIVE = ["queued", "running", "awaiting-approval"];
const element = document.getElementById("status");
const liveNote = document.getElementById("live-note");
const brand = document.getElementById("brand");
const brandName = document.getElementById("brand-name");
const brandLogo = document.getElementById("brand-logo");
const title = document.getElementById("status-title");

function showBranding(b) {
  if (!b) return "";
  if (b.name) {
    brandName.textContent = b.name;
    title.textContent = `Your request to ${b.name}`;
  }
  // The API checked these at deploy; the page checks their form again
  // before it uses them (an https: or data:image URL, a #rrggbb colour).
  if (b.logoUrl && /^(https:\/\/|data:image\/)/.test(b.logoUrl)) {
    brandLogo.src = b.logoUrl;
    brandLogo.alt = b.name ? `${b.name} logo` : "Logo";
    brandLogo.hidden = false;
  }
  if (b.accentColor && /^#[0-9a-fA-F]{6}$/.test(b.accentColor)) {
    document.documentElement.style.setProperty("--stead-accent", b.accentColor);
  }
  brand.hidden = !b.name && brandLogo.hidden;
  return b.name || "";
}

globalThis.Stead.status({
  element,
  runId,
  token,
  baseUrl: "",
  styles: false,
  onChange: ({ state, headline, run }) => {
    const name = showBranding(run && run.branding);
    liveNote.hidden = !LIVE.includes(state);
    document.title = headline + (name ? ` · ${name}` : " · Status");
  },
});
