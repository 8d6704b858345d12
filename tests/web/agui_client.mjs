// An AG-UI client made with the official library (@ag-ui/client's HttpAgent), driving
// an agentloop AG-UI endpoint through a plan of steps.
//
// Usage: node agui_client.mjs PLAN_JSON
// The plan: {url, threadId, steps: [{user?: text, toolResults?: [{toolCallId, content}],
//   tools?: [Tool], resume?: [ResumeEntry], abortOn?: {type, name?}}]}
// Each step adds its messages to the agent and runs it once (runAgent). It prints one
// JSON line per thing seen: {step, event} for each event the client's pipeline
// delivered, {step, error} when a run failed, {step, done, pendingInterrupts} when a
// run ended, and last {messages} (the client's conversation).
import { HttpAgent } from "@ag-ui/client";

const plan = JSON.parse(process.argv[2]);
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const agent = new HttpAgent({ url: plan.url, threadId: plan.threadId });
let counter = 0;
const nextId = () => `client-${++counter}`;

for (const [step, spec] of plan.steps.entries()) {
  for (const result of spec.toolResults ?? []) {
    agent.addMessage({ id: nextId(), role: "tool", toolCallId: result.toolCallId, content: result.content });
  }
  if (spec.user !== undefined) agent.addMessage({ id: nextId(), role: "user", content: spec.user });
  const subscriber = {
    onEvent({ event }) {
      say({ step, event });
      const abortOn = spec.abortOn;
      if (abortOn && event.type === abortOn.type && (!abortOn.name || event.name === abortOn.name)) {
        agent.abortRun();
      }
    },
  };
  try {
    await agent.runAgent({ runId: `run-${step}`, tools: spec.tools ?? [], resume: spec.resume }, subscriber);
  } catch (error) {
    say({ step, error: String(error && error.message ? error.message : error) });
  }
  say({ step, done: true, pendingInterrupts: agent.pendingInterrupts ?? [] });
}
say({ messages: agent.messages });
