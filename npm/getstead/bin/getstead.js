#!/usr/bin/env node
// getstead: runs the prebuilt `stead` binary of this platform, installed
// with this package as one of its optional dependencies
// (getstead-<os>-<arch>), the way esbuild ships its Go binary. Arguments,
// standard streams and the exit status pass through unchanged.
"use strict";
const { spawnSync } = require("node:child_process");
const path = require("node:path");

const platforms = {
  "linux x64": "getstead-linux-x64",
  "linux arm64": "getstead-linux-arm64",
  "darwin x64": "getstead-darwin-x64",
  "darwin arm64": "getstead-darwin-arm64",
  "win32 x64": "getstead-windows-x64",
};

const key = `${process.platform} ${process.arch}`;
const pkg = platforms[key];
if (!pkg) {
  console.error(`getstead: there is no prebuilt stead for ${key}; the platforms are ${Object.keys(platforms).join(", ")}. Build it from source: go build ./cli/stead`);
  process.exit(1);
}
let bin;
try {
  const dir = path.dirname(require.resolve(`${pkg}/package.json`));
  bin = path.join(dir, "bin", process.platform === "win32" ? "stead.exe" : "stead");
} catch {
  console.error(`getstead: ${pkg}, which holds the stead binary for ${key}, is not installed; install again without --omit=optional (or --no-optional)`);
  process.exit(1);
}
const r = spawnSync(bin, process.argv.slice(2), { stdio: "inherit" });
if (r.error) {
  console.error(`getstead: could not run ${bin}: ${r.error.message}`);
  process.exit(1);
}
if (r.signal) process.kill(process.pid, r.signal);
process.exit(r.status ?? 1);
