// @openai/agents (the JS agents SDK) on its Responses model: a run, a function tool that runs
// while its arguments stream, and a conversation continued server-side by `conversationId`.
import { Agent, run, setTracingDisabled, tool } from "@openai/agents";
import { OpenAIResponsesModel } from "@openai/agents-openai";
import OpenAI from "openai";
import { z } from "zod";
import { baseURL, main, model } from "./main.mjs";

setTracingDisabled(true); // spans would go to OpenAI's servers; the suite stays on the loopback
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 10_000 });
const responses = new OpenAIResponsesModel(client, model);

await main({
  run: async () => {
    const agent = new Agent({ name: "hello", model: responses });
    const result = await run(agent, "hi");
    return { text: result.finalOutput };
  },
  "tool-stream": async () => {
    const cities = [];
    const getWeather = tool({
      name: "get_weather",
      description: "The weather in a city",
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        cities.push(city);
        return `sunny in ${city}, 21 °C`;
      },
    });
    const agent = new Agent({ name: "weather", model: responses, tools: [getWeather] });
    const result = await run(agent, "Weather in Paris?", { stream: true });
    let announced = false;
    for await (const event of result) {
      const data = event.type === "raw_model_stream_event" ? event.data : null;
      const raw = data?.type === "model" ? data.event : null;
      if (!announced && raw?.type === "response.function_call_arguments.delta") {
        announced = true;
        console.log(JSON.stringify({ fragment: raw.delta }));
      }
    }
    await result.completed;
    return { cities, text: result.finalOutput };
  },
  conversation: async () => {
    const agent = new Agent({ name: "memory", model: responses });
    const conversation = await client.conversations.create({});
    const first = await run(agent, "My name is Ada.", { conversationId: conversation.id });
    const second = await run(agent, "What is my name?", { conversationId: conversation.id });
    const items = await client.conversations.items.list(conversation.id, { order: "asc" });
    return {
      texts: [first.finalOutput, second.finalOutput],
      items: items.data.map((item) => item.role),
    };
  },
});
