// The test app of useRun.test.js: one component that follows a run with
// useRun and shows what it returns in the DOM. Its page (served by the
// test) sets window.steadTest: where Stead is, the run, and the token: a
// string, or "function" for a token function that fetches one from the
// test's server (/token) each time it is called.
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { useRun, type TokenSource } from "@getstead/react";

interface Config {
  baseUrl: string;
  runId: string;
  token: string;
  strict: boolean;
}

declare global {
  interface Window {
    steadTest: Config;
  }
}

const config = window.steadTest;

const token: TokenSource =
  config.token === "function"
    ? async () => {
        const res = await fetch("/token", { method: "POST" });
        if (!res.ok) throw new Error(`the token server answered ${res.status}`);
        return res.text();
      }
    : config.token;

function RunStatus({ runId }: { runId: string }) {
  const { run, status, approval, events, error, isLive } = useRun(runId, { baseUrl: config.baseUrl, token });
  return (
    <section id="run" data-status={status ?? ""} data-live={String(isLive)}>
      <h1>Run {run?.id ?? runId}</h1>
      <p id="status">{status ?? "loading"}</p>
      {approval && (
        <p id="approval" data-approval-id={approval.id}>
          Waiting for approval of <span id="tool">{approval.label || approval.tool}</span> until{" "}
          <time id="expires" dateTime={approval.expiresAt}>{approval.expiresAt}</time>
        </p>
      )}
      <ol id="events">
        {events.map((ev) => (
          <li key={ev.seq} data-seq={ev.seq}>
            {ev.seq} {ev.type}
          </li>
        ))}
      </ol>
      {error && <p role="alert">{error.message}</p>}
    </section>
  );
}

const app = <RunStatus runId={config.runId} />;
createRoot(document.getElementById("root")!).render(config.strict ? <StrictMode>{app}</StrictMode> : app);
