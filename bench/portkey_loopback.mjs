// Start Portkey's gateway (the script given as the first argument) listening on 127.0.0.1 only:
// its start-server calls @hono/node-server's serve({fetch, port}) without a hostname, which
// listens on every interface. Used by bench/gateway.py (--portkey); the remaining arguments are
// Portkey's own (--port=N --headless).
import http from "node:http";
import { pathToFileURL } from "node:url";

const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number") {
    const [port, ...rest] = args;
    const callback = rest.find((a) => typeof a === "function");
    return listen.call(this, { port, host: "127.0.0.1" }, callback);
  }
  if (args[0] && typeof args[0] === "object" && !args[0].path) {
    args[0] = { ...args[0], host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
const [script, ...rest] = process.argv.slice(2);
process.argv = [process.argv[0], script, ...rest];
await import(pathToFileURL(script).href);
