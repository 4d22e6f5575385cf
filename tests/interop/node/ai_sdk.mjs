// The Vercel AI SDK: `@ai-sdk/openai` (its default model speaks Responses, with `store: true`,
// so a second turn replays stored items as `item_reference`), `@ai-sdk/openai-compatible`
// (Chat Completions) and `@ai-sdk/open-responses` (the Open Responses specification). Each
// provider runs the same cases.
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createOpenResponses } from "@ai-sdk/open-responses";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";
import OpenAI from "openai";
import { baseURL, main, model } from "./main.mjs";

const providers = {
  openai: createOpenAI({ baseURL, apiKey: "unused" })(model),
  compatible: createOpenAICompatible({ name: "iris", baseURL, apiKey: "unused" })(model),
  responses: createOpenResponses({ name: "iris", url: `${baseURL}/responses`, apiKey: "unused" })(
    model,
  ),
};
const settings = { maxRetries: 0 };

function weatherTools(cities) {
  return {
    get_weather: tool({
      description: "The weather in a city",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        cities.push(city);
        return `sunny in ${city}, 21 °C`;
      },
    }),
  };
}

// A tool the client runs itself (no `execute`): the stream ends at its call.
const clientWeather = {
  get_weather: tool({
    description: "The weather in a city",
    inputSchema: z.object({ city: z.string() }),
  }),
};

function cases(name, model) {
  return {
    // Announces the call's first argument fragment at once: the test holds the model until
    // it reads that line, so it proves the fragment came before the model finished.
    [`${name}-tool-stream`]: async () => {
      const result = streamText({
        ...settings,
        model,
        prompt: "Weather in Paris?",
        tools: clientWeather,
      });
      const deltas = [];
      let started = null;
      for await (const part of result.fullStream) {
        if (part.type === "tool-input-start") started = part.toolName;
        if (part.type === "tool-input-delta") {
          if (!deltas.length) console.log(JSON.stringify({ fragment: part.delta }));
          deltas.push(part.delta);
        }
      }
      const [call] = await result.toolCalls;
      return { started, arguments: JSON.parse(deltas.join("")), input: call.input };
    },
    [`${name}-generate`]: async () => {
      const result = await generateText({ ...settings, model, prompt: "hi" });
      return { text: result.text, finishReason: result.finishReason };
    },
    [`${name}-stream`]: async () => {
      const result = streamText({ ...settings, model, prompt: "hi" });
      const deltas = [];
      for await (const delta of result.textStream) deltas.push(delta);
      return { deltas, finishReason: await result.finishReason };
    },
    [`${name}-tools`]: async () => {
      const cities = [];
      const result = await generateText({
        ...settings,
        model,
        prompt: "Weather in Paris?",
        tools: weatherTools(cities),
        stopWhen: stepCountIs(3),
      });
      return { cities, text: result.text, steps: result.steps.length };
    },
    [`${name}-stream-tools`]: async () => {
      const cities = [];
      const result = streamText({
        ...settings,
        model,
        prompt: "Weather in Paris?",
        tools: weatherTools(cities),
        stopWhen: stepCountIs(3),
      });
      const deltas = [];
      for await (const delta of result.textStream) deltas.push(delta);
      return { cities, deltas, steps: (await result.steps).length };
    },
    // The Responses model replays the step's reasoning as an `item_reference` (store: true).
    // It reads reasoning text from a reasoning item's summary only, which Iris gives only when
    // the provider summarised; the chat model reads `reasoning_content`, so it shows the text.
    [`${name}-reasoning-tools`]: async () => {
      const cities = [];
      const result = await generateText({
        ...settings,
        model,
        prompt: "Weather in Paris?",
        tools: weatherTools(cities),
        stopWhen: stepCountIs(3),
      });
      const [first] = result.steps;
      const reasoned = first.reasoning.length > 0;
      const shown = name === "compatible" ? { reasoning: first.reasoningText } : {};
      return { cities, reasoned, ...shown, text: result.text };
    },
    [`${name}-second-turn`]: async () => {
      const messages = [{ role: "user", content: "My name is Ada." }];
      const first = await generateText({ ...settings, model, messages });
      messages.push(...first.response.messages, { role: "user", content: "What is my name?" });
      const second = await generateText({ ...settings, model, messages });
      return { first: first.text, second: second.text };
    },
  };
}

// `@ai-sdk/openai`'s `conversation` option: the server keeps the history.
async function conversation() {
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
  const { id } = await client.conversations.create({});
  const providerOptions = { openai: { conversation: id } };
  const ask = (prompt) =>
    generateText({ ...settings, model: providers.openai, prompt, providerOptions });
  const first = await ask("My name is Ada.");
  const second = await ask("What is my name?");
  const items = await client.conversations.items.list(id, { order: "asc" });
  return { first: first.text, second: second.text, items: items.data.map((i) => i.role) };
}

// Iris's own agent (`iris-agent`, behind the API key): its tool runs arrive as `mcp_call`
// items, which the AI SDK reports as provider-executed tool calls and results.
async function agent() {
  const apiKey = process.env.IRIS_API_KEY;
  const model = createOpenAI({ baseURL, apiKey })("iris-agent");
  const result = streamText({ ...settings, model, prompt: "What do my notes say?" });
  const deltas = [];
  const tools = [];
  for await (const part of result.fullStream) {
    if (part.type === "text-delta") deltas.push(part.text);
    if (part.type === "tool-call") tools.push(["call", part.toolName, part.providerExecuted]);
    if (part.type === "tool-result") tools.push(["result", part.toolName, part.output.output]);
  }
  return { text: deltas.join(""), tools, finishReason: await result.finishReason };
}

await main({
  "openai-agent": agent,
  ...cases("openai", providers.openai),
  ...cases("compatible", providers.compatible),
  ...cases("responses", providers.responses),
  "openai-conversation": conversation,
});
