// The outside reference: the same plugin under nginx with its Lua module (Debian nginx +
// libnginx-mod-http-lua, LuaJIT, lua-cjson). The plugin source is loaded once per nginx worker and run
// per request in a fresh environment with shims for the sandbox API: ngx.hmac_sha1 (so the plugin uses
// sha1 here), cjson.safe for json.decode, a plain comparison for timingSafeEqual.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { SECRET, luaPlugin } from "./plugins.ts";

export interface NginxServer {
  port: number;
  stop(): Promise<void>;
}

const MODULES = ["/usr/lib/nginx/modules/ndk_http_module.so", "/usr/lib/nginx/modules/ngx_http_lua_module.so"];

export function nginxAvailable(): boolean {
  return existsSync("/usr/sbin/nginx") && MODULES.every((m) => existsSync(m));
}

export async function startNginx(port: number, workers: number): Promise<NginxServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "sandbox-bench-nginx-"));
  const source = luaPlugin("sha1");
  const conf = `
worker_processes ${workers};
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
${MODULES.map((m) => `load_module ${m};`).join("\n")}
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  client_body_buffer_size 64k;
  client_max_body_size 1m;
  init_by_lua_block {
    local cjson = require "cjson.safe"
    local plugin = assert(loadstring(${luaLong(source)}, "=[plugin]"))
    local function tohex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end
    local REJECT = {}
    function run_plugin()
      ngx.req.read_body()
      local rejected
      local env = {
        request = { method = ngx.req.get_method(), body = ngx.req.get_body_data(), headers = ngx.req.get_headers() },
        secrets = { signingSecret = ${luaLong(SECRET)} },
        json = { decode = cjson.decode },
        hmacShaSign = function(key, data) return tohex(ngx.hmac_sha1(key, data)) end,
        timingSafeEqual = function(a, b) return a == b end,
        reject = function(message) rejected = message; error(REJECT, 0) end,
        type = type, tostring = tostring, string = string,
      }
      setfenv(plugin, env)
      local ok, result = pcall(plugin)
      ngx.header.content_type = "application/json"
      if rejected then ngx.status = 401; ngx.say(cjson.encode({ error = rejected })); return end
      if not ok then ngx.status = 500; ngx.say(cjson.encode({ error = tostring(result) })); return end
      ngx.say(cjson.encode(result))
    end
  }
  server {
    listen 127.0.0.1:${port};
    location / { content_by_lua_block { run_plugin() } }
  }
}
`;
  writeFileSync(path.join(dir, "nginx.conf"), conf);
  const child: ChildProcess = spawn("/usr/sbin/nginx", ["-p", dir, "-c", path.join(dir, "nginx.conf")], { stdio: "ignore" });
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 100));
    if (existsSync(path.join(dir, "nginx.pid"))) break;
  }
  return {
    port,
    stop: () =>
      new Promise((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGQUIT");
      }),
  };
}

function luaLong(s: string): string {
  let eq = "";
  while (s.includes(`]${eq}]`)) eq += "=";
  return `[${eq}[${s}]${eq}]`;
}
