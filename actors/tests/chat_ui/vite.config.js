// Built by actors/tests/chat_ui_browser.rs into a directory the test serves, with the server's
// API proxied under /api (same origin: the server sends no CORS headers).
import { defineConfig } from "vite";

export default defineConfig({
  base: "./",
  build: { sourcemap: false, reportCompressedSize: false },
  logLevel: "error",
});
