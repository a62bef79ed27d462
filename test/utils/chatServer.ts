/**
 * A fake OpenAI-compatible chat server for the command's tests: a real node:http server on 127.0.0.1
 * whose answer to each request is chosen from the request (so concurrent runs of the command can share
 * it), streamed as server-sent events with a delay between chunks.
 */
import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * What to answer: the chunks' JSON payloads streamed one every `delayMillis`, then `[DONE]`; or, with
 * `status`, that HTTP status and `body`. A gate holds the stream before the chunk at `at` until `open`
 * resolves (the test releases it once it has seen what came before).
 */
export interface Reply {
  readonly chunks: ReadonlyArray<unknown>
  readonly delayMillis?: number | undefined
  readonly gates?: ReadonlyArray<{ readonly at: number; readonly open: Promise<void> }> | undefined
  readonly status?: number | undefined
  readonly body?: string | undefined
}

/** A running server. */
export interface ChatServer {
  readonly url: string
  readonly requests: Array<any>
}

/** Starts the server for the scope; `answer` picks the reply from the request body. */
export const make = (answer: (body: any) => Reply) =>
  Effect.acquireRelease(
    Effect.async<{ server: http.Server; handle: ChatServer }>((resume) => {
      const requests: Array<any> = []
      const server = http.createServer((req, res) => {
        let text = ""
        req.on("data", (chunk) => (text += chunk))
        req.on("end", () => {
          const body = JSON.parse(text)
          requests.push(body)
          const reply = req.url === "/v1/chat/completions"
            ? answer(body)
            : {
              chunks: [],
              status: 404,
              body: JSON.stringify({ error: { message: "File Not Found", type: "not_found_error" } })
            }
          if (reply.status !== undefined) {
            res.writeHead(reply.status, { "content-type": "application/json" })
            res.end(reply.body ?? "")
            return
          }
          res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
          res.flushHeaders()
          let index = 0
          const passed = new Set<number>()
          let waiting = false
          const timer = setInterval(() => {
            if (waiting) return
            const gate = reply.gates?.find((each) => each.at === index && !passed.has(each.at))
            if (gate !== undefined) {
              waiting = true
              void gate.open.then(() => {
                passed.add(gate.at)
                waiting = false
              })
              return
            }
            if (index < reply.chunks.length) {
              res.write(`data: ${JSON.stringify(reply.chunks[index++])}\n\n`)
            } else {
              clearInterval(timer)
              res.end("data: [DONE]\n\n")
            }
          }, reply.delayMillis ?? 1)
          res.on("close", () => clearInterval(timer))
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({ server, handle: { url: `http://127.0.0.1:${port}`, requests } }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ handle }) => handle))

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
