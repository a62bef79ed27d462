/**
 * A fake OpenAI-compatible chat server for the command's tests: `Testing.fakeHttpServer` on 127.0.0.1
 * whose answer to each request is chosen from the request (so concurrent runs of the command can share
 * it), streamed as server-sent events with a delay between chunks.
 */
import * as Effect from "effect/Effect"
import * as Testing from "../../src/Testing.js"

/**
 * What to answer: the chunks' JSON payloads streamed one every `delayMillis`, then `[DONE]`; or, with
 * `status`, that HTTP status and `body`. A gate holds the stream before the chunk at `at` until `open`
 * resolves (the test releases it once it has seen what came before; `at` = the number of chunks holds
 * the `[DONE]`).
 */
export interface Reply {
  readonly chunks: ReadonlyArray<unknown>
  readonly delayMillis?: number | undefined
  readonly gates?: ReadonlyArray<{ readonly at: number; readonly open: Promise<void> }> | undefined
  readonly status?: number | undefined
  readonly body?: string | undefined
}

/** A running server: its URL and the body of every request so far. */
export interface ChatServer {
  readonly url: string
  readonly requests: ReadonlyArray<any>
}

/** Starts the server for the scope; `answer` picks the reply from the request body. */
export const make = (answer: (body: any) => Reply) =>
  Effect.map(
    Testing.fakeHttpServer((request): Testing.Reply => {
      if (request.url !== "/v1/chat/completions") {
        const body = JSON.stringify({ error: { message: "File Not Found", type: "not_found_error" } })
        return { _tag: "Status", status: 404, body }
      }
      const reply = answer(request.body)
      if (reply.status !== undefined) return { _tag: "Status", status: reply.status, body: reply.body ?? "" }
      return {
        _tag: "Sse",
        frames: [...reply.chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`), "data: [DONE]\n\n"],
        delayMillis: reply.delayMillis ?? 1,
        gates: reply.gates?.map(({ at, open }) => ({ at, open: Effect.promise(() => open) }))
      }
    }),
    (server): ChatServer => ({
      url: server.url,
      get requests() {
        return server.requests.map((request) => request.body)
      }
    })
  )

const chunk = (delta: unknown, finishReason: string | null = null, usage?: unknown) => ({
  id: "chatcmpl-test",
  object: "chat.completion.chunk",
  model: "test-model",
  choices: [{ index: 0, delta, finish_reason: finishReason }],
  ...(usage === undefined ? {} : { usage })
})

/** A text answer in `parts`, ending with `finishReason` and the given output token count. */
export const text = (
  parts: ReadonlyArray<string>,
  options: { readonly finishReason?: string; readonly outputTokens?: number; readonly delayMillis?: number } = {}
): Reply => ({
  chunks: [
    chunk({ role: "assistant", content: "" }),
    ...parts.map((part) => chunk({ content: part })),
    chunk({}, options.finishReason ?? "stop"),
    {
      ...chunk({}, null, {
        prompt_tokens: 10,
        completion_tokens: options.outputTokens ?? parts.length,
        total_tokens: 10 + (options.outputTokens ?? parts.length)
      }),
      choices: []
    }
  ],
  delayMillis: options.delayMillis
})

/** One tool call. */
export const toolCall = (id: string, name: string, input: unknown): Reply => ({
  chunks: [
    chunk({
      role: "assistant",
      tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: JSON.stringify(input) } }]
    }),
    chunk({}, "tool_calls")
  ]
})

/** The text of the last user message of a request body. */
export const lastUserText = (body: any): string => {
  const users = (body.messages as Array<any>).filter((message) => message.role === "user")
  const content = users[users.length - 1]?.content
  return typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((part: any) => part.text ?? "").join("")
    : ""
}

/** Whether the request answers tool calls (its last message is a tool result). */
export const afterToolResult = (body: any): boolean => body.messages[body.messages.length - 1]?.role === "tool"
