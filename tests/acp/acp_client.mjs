// An ACP client made with the official library (@agentclientprotocol/sdk), driving
// `python -m agentloop acp` over the child's stdio through a plan of steps.
//
// Usage: node acp_client.mjs PLAN_JSON
// The plan: {server: [argv...], cwd, env, transcript (a file: every line the agent
// sent, and every line the client sent, as {"from": "agent"|"client", "line": ...}),
// capabilities (clientCapabilities), permissions (the option ids to answer, in
// order), buffers ({absolute path: text}: the editor's unsaved files),
// steps: [{op: "new"} | {op: "prompt", text, cancelOn?: "in_progress" | "output"} |
//         (vanishOn: the client exits there, leaving the agent running)
//         {op: "load", sessionId} | {op: "setMode", modeId} | {op: "raw", line} |
//         {op: "exit"}]}
// It prints one JSON line per thing seen: {event: "pid"|"initialized"|"session"|
// "update"|"permission"|"stop"|"error"|"fs_read"|"fs_write"|"terminal"|"loaded"|"mode"}.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const plan = JSON.parse(process.argv[2]);
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const record = (from, text) => {
  if (plan.transcript) appendFileSync(plan.transcript, JSON.stringify({ from, line: text }) + "\n");
};

const child = spawn(plan.server[0], plan.server.slice(1), {
  cwd: plan.cwd,
  env: plan.env,
  stdio: ["pipe", "pipe", "inherit"],
});
say({ event: "pid", pid: child.pid });

// Tap both directions, line by line, for the schema checks.
let pending = "";
child.stdout.on("data", (chunk) => {
  pending += chunk.toString("utf8");
  let end;
  while ((end = pending.indexOf("\n")) >= 0) {
    record("agent", pending.slice(0, end));
    pending = pending.slice(end + 1);
  }
});
const input = Readable.toWeb(child.stdout);
const childStdin = Writable.toWeb(child.stdin);
const output = new WritableStream({
  async write(chunk) {
    for (const line of new TextDecoder().decode(chunk).split("\n")) {
      if (line) record("client", line);
    }
    const writer = childStdin.getWriter();
    try {
      await writer.write(chunk);
    } finally {
      writer.releaseLock();
    }
  },
});

const permissions = [...(plan.permissions ?? [])];
const buffers = { ...(plan.buffers ?? {}) };
const terminals = new Map();
let nextTerminal = 0;
let onUpdate = () => {};

const app = acp
  .client({ name: "agentloop-tests" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    say({ event: "update", update: params.update });
    onUpdate(params);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    say({ event: "permission", request: params });
    const optionId = permissions.shift();
    if (optionId === undefined) return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
    say({ event: "fs_read", path: params.path });
    if (!(params.path in buffers)) throw acp.RequestError.resourceNotFound(params.path);
    return { content: buffers[params.path] };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
    say({ event: "fs_write", path: params.path, content: params.content });
    buffers[params.path] = params.content;
    return {};
  })
  .onRequest(acp.methods.client.terminal.create, ({ params }) => {
    const id = `term-${++nextTerminal}`;
    say({ event: "terminal", op: "create", id, command: params.command, args: params.args ?? [] });
    const proc = spawn(params.command, params.args ?? [], {
      cwd: params.cwd ?? plan.cwd,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const term = { proc, output: "", exit: null };
    term.done = new Promise((resolve) => {
      proc.on("exit", (code, signal) => {
        term.exit = { exitCode: code, signal: signal ?? null };
        resolve();
      });
    });
    proc.stdout.on("data", (d) => (term.output += d.toString("utf8")));
    proc.stderr.on("data", (d) => (term.output += d.toString("utf8")));
    terminals.set(id, term);
    say({ event: "terminal", op: "pid", id, pid: proc.pid });
    return { terminalId: id };
  })
  .onRequest(acp.methods.client.terminal.output, ({ params }) => {
    const term = terminals.get(params.terminalId);
    return { output: term.output, truncated: false, exitStatus: term.exit };
  })
  .onRequest(acp.methods.client.terminal.waitForExit, async ({ params }) => {
    const term = terminals.get(params.terminalId);
    await term.done;
    return term.exit;
  })
  .onRequest(acp.methods.client.terminal.kill, ({ params }) => {
    say({ event: "terminal", op: "kill", id: params.terminalId });
    const term = terminals.get(params.terminalId);
    try {
      process.kill(-term.proc.pid, "SIGKILL");
    } catch {}
    return {};
  })
  .onRequest(acp.methods.client.terminal.release, ({ params }) => {
    say({ event: "terminal", op: "release", id: params.terminalId });
    terminals.delete(params.terminalId);
    return {};
  });

const stream = acp.ndJsonStream(output, input);
try {
  await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: plan.capabilities ?? {},
    });
    say({ event: "initialized", response: init });
    let sessionId = null;
    for (const step of plan.steps) {
      try {
        if (step.op === "new") {
          const response = await ctx.request(acp.methods.agent.session.new, {
            cwd: plan.cwd,
            mcpServers: step.mcpServers ?? [],
          });
          sessionId = response.sessionId;
          say({ event: "session", response });
        } else if (step.op === "load") {
          const response = await ctx.request(acp.methods.agent.session.load, {
            sessionId: step.sessionId,
            cwd: plan.cwd,
            mcpServers: [],
          });
          sessionId = step.sessionId;
          say({ event: "loaded", response });
        } else if (step.op === "setMode") {
          const response = await ctx.request(acp.methods.agent.session.setMode, {
            sessionId,
            modeId: step.modeId,
          });
          say({ event: "mode", response });
        } else if (step.op === "prompt") {
          if (step.cancelOn || step.vanishOn) {
            onUpdate = (params) => {
              const update = params.update;
              const status = step.cancelOn ?? step.vanishOn;
              // "output": the first partial output (the command is under way); else a status.
              const seen =
                status === "output"
                  ? update.content !== undefined && update.status === undefined
                  : update.status === status;
              if (update.sessionUpdate === "tool_call_update" && seen) {
                onUpdate = () => {};
                if (step.vanishOn) {
                  say({ event: "vanishing" });
                  process.exit(0); // the client is gone: the agent's stdin ends
                }
                ctx.notify(acp.methods.agent.session.cancel, { sessionId });
              }
            };
          }
          const response = await ctx.request(acp.methods.agent.session.prompt, {
            sessionId: step.sessionId ?? sessionId,
            prompt: [{ type: "text", text: step.text }],
          });
          onUpdate = () => {};
          say({ event: "stop", response });
        } else if (step.op === "raw") {
          const writer = childStdin.getWriter();
          await writer.write(new TextEncoder().encode(step.line + "\n"));
          writer.releaseLock();
          record("client", step.line);
        } else if (step.op === "exit") {
          say({ event: "exiting" });
          process.exit(0);
        }
      } catch (error) {
        say({ event: "error", op: step.op, code: error.code ?? null, message: String(error.message ?? error) });
      }
    }
  });
} finally {
  child.stdin.end();
}
await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on("exit", resolve)));
say({ event: "exit", code: child.exitCode });
