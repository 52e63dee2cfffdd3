// The colour theme: the system's (prefers-color-scheme) unless the viewer
// chose light or dark with the header's toggle; the choice is kept in
// localStorage and set as data-theme on <html>, which console.css reads.

const KEY = "stead.theme";
const NEXT = { system: "dark", dark: "light", light: "system" };

export function theme() {
  const t = localStorage.getItem(KEY);
  return t === "light" || t === "dark" ? t : "system";
}

export function applyTheme(t = theme()) {
  if (t === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
}

// themeToggle wires the button: each press goes system → dark → light.
export function themeToggle(button) {
  const paint = () => {
    const t = theme();
    button.textContent = `Theme: ${t}`;
    button.dataset.theme = t;
  };
  button.addEventListener("click", () => {
    const t = NEXT[theme()];
    if (t === "system") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, t);
    applyTheme(t);
    paint();
  });
  paint();
}
