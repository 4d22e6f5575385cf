// openai-node (npm `openai`): the everyday calls, each a case the interop suite runs.
import OpenAI from "openai";
import { baseURL, main, model } from "./main.mjs";

const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 10_000 });
const weather = {
  name: "get_weather",
  description: "The weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false,
  },
};

// Says a tool call's first argument fragment arrived, at once: the test holds the model until
// it reads this line, so the line proves the fragment came before the model finished.
function announce(fragment) {
  console.log(JSON.stringify({ fragment }));
}

await main({
  // `stream` omitted, as the SDK sends it unless told otherwise.
  "chat-create": async () => {
    const completion = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "hi" }],
    });
    return { object: completion.object, text: completion.choices[0].message.content };
  },
  "chat-stream": async () => {
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    const deltas = [];
    for await (const chunk of stream) {
      const content = chunk.choices[0]?.delta?.content;
      if (content) deltas.push(content);
    }
    return { deltas };
  },
  "chat-tools": async () => {
    const tools = [{ type: "function", function: weather }];
    const messages = [{ role: "user", content: "Weather in Paris?" }];
    const first = await client.chat.completions.create({ model, messages, tools });
    const asked = first.choices[0].message;
    const call = asked.tool_calls[0];
    messages.push(asked, { role: "tool", tool_call_id: call.id, content: "sunny, 21" });
    const final = await client.chat.completions.create({ model, messages, tools });
    return {
      call: { name: call.function.name, arguments: JSON.parse(call.function.arguments) },
      text: final.choices[0].message.content,
    };
  },
  "responses-create": async () => {
    const response = await client.responses.create({ model, input: "hi" });
    return { object: response.object, status: response.status, text: response.output_text };
  },
  "responses-stream": async () => {
    const stream = await client.responses.create({ model, input: "hi", stream: true });
    const deltas = [];
    let last = null;
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") deltas.push(event.delta);
      last = event.type;
    }
    return { deltas, last };
  },
  "responses-tools": async () => {
    const tools = [{ type: "function", ...weather }];
    const first = await client.responses.create({ model, input: "Weather in Paris?", tools });
    const call = first.output.find((item) => item.type === "function_call");
    const final = await client.responses.create({
      model,
      tools,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny, 21" }],
    });
    return {
      call: { name: call.name, arguments: JSON.parse(call.arguments) },
      text: final.output_text,
    };
  },
  "chat-tool-stream": async () => {
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: [{ type: "function", function: weather }],
      stream: true,
    });
    const calls = [];
    let announced = false;
    let finish = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      for (const call of choice?.delta?.tool_calls ?? []) {
        calls.push(call);
        if (!announced && call.function?.arguments) {
          announced = true;
          announce(call.function.arguments);
        }
      }
      finish = choice?.finish_reason ?? finish;
    }
    const heads = calls.filter((call) => call.id !== undefined);
    return {
      heads: heads.map((call) => [call.index, call.id, call.function.name]),
      arguments: JSON.parse(calls.map((call) => call.function?.arguments ?? "").join("")),
      finish,
    };
  },
  "responses-tool-stream": async () => {
    const stream = await client.responses.create({
      model,
      input: "Weather in Paris?",
      tools: [{ type: "function", ...weather }],
      stream: true,
    });
    const deltas = [];
    let done = null;
    for await (const event of stream) {
      if (event.type === "response.function_call_arguments.delta") {
        if (!deltas.length) announce(event.delta);
        deltas.push(event.delta);
      }
      if (event.type === "response.completed") done = event.response;
    }
    const call = done.output.find((item) => item.type === "function_call");
    return { deltas, call: [call.call_id, call.name, JSON.parse(call.arguments)] };
  },
  conversations: async () => {
    const conversation = await client.conversations.create({
      items: [{ type: "message", role: "user", content: "My name is Ada." }],
    });
    const first = await client.responses.create({
      model,
      conversation: conversation.id,
      input: "Hi!",
    });
    const second = await client.responses.create({
      model,
      conversation: conversation.id,
      input: "What is my name?",
    });
    const items = [];
    for await (const item of client.conversations.items.list(conversation.id, { order: "asc" })) {
      items.push(item.role);
    }
    const deleted = await client.conversations.delete(conversation.id);
    return {
      conversation: second.conversation?.id === conversation.id,
      texts: [first.output_text, second.output_text],
      items,
      deleted: deleted.deleted,
    };
  },
});
