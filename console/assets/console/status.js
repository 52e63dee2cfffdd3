// The customer status page, /status/{runId}#token=stc_…
//
// The customer token comes in the URL fragment, which the browser never
// sends to a server. It is moved to this tab's sessionStorage and removed
// from the address bar (so it does not linger in history or screenshots),
// and sent to the API only in the Authorization header, by embed.js.

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

const element = document.getElementById("status");
globalThis.Stead.status({
  element,
  runId,
  token,
  baseUrl: "",
  styles: false,
  onChange: ({ headline }) => {
    document.title = headline + " · Status";
  },
});
