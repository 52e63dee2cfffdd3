import { readFileSync } from "fs";

export function secrets() {
  return readFileSync("/etc/passwd", "utf8");
}
