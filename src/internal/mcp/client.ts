/**
 * One connected MCP server, as `Mcp.connect` gives it: its connection, replaced once per call that finds
 * it broken (or whose session the server forgot); its tool list, kept current as the server announces
 * changes; and each call bounded by a default deadline when no timeout of its own is configured.
 */
import type { CallToolResult, Tool as McpToolDefinition } from "@modelcontextprotocol/sdk/types.js"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Errors from "../../Errors.js"
import type { McpError, McpTool, Server, ServerOptions } from "../../Mcp.js"
import type * as Tool from "../../Tool.js"
import { defaults } from "./config.js"
import { close, type Connection, isBroken, openConnection } from "./connection.js"
import { toOutput } from "./content.js"
import type { McpConnectionFailed, McpInitializeTimeout, McpToolInvalid } from "./errors.js"
import { CallFailed } from "./guard.js"
import { invoke, listTools } from "./requests.js"
import { configuredTimeout, makeTools, shown } from "./tools.js"

type ReconnectError = McpConnectionFailed | McpInitializeTimeout | McpToolInvalid

/**
 * Connects to one server for the life of the scope: starts it (stdio) or opens a session (HTTP),
 * initializes, lists its tools and follows their changes. The scope's end closes the session and
 * ends the child.
 */
export const connect = (options: ServerOptions): Effect.Effect<Server, McpError, Scope.Scope> =>
  Effect.gen(function*() {
    const state: { current: Connection | undefined } = { current: undefined }
    const listChanged = yield* Queue.sliding<void>(1)
    const tools = yield* SubscriptionRef.make<ReadonlyArray<McpTool>>([])
    const lock = yield* Semaphore.make(1)
    yield* Effect.addFinalizer(() => state.current === undefined ? Effect.void : close(state.current))

    const open = Effect.suspend(() => openConnection(options, () => Queue.offerUnsafe(listChanged, undefined)))
    const refresh = (connection: Connection): Effect.Effect<void, ReconnectError> =>
      listTools(options, connection).pipe(
        Effect.flatMap((definitions) => makeTools(options, definitions, call)),
        Effect.flatMap((made) => SubscriptionRef.set(tools, made))
      )

    // a broken connection is replaced once per call that finds it broken
    const reconnect = (broken: Connection | undefined): Effect.Effect<Connection, ReconnectError> =>
      lock.withPermits(1)(Effect.suspend(() => {
        const current = state.current
        if (current !== undefined && current !== broken && !isBroken(current)) return Effect.succeed(current)
        return Effect.gen(function*() {
          if (current !== undefined) {
            state.current = undefined
            yield* close(current)
          }
          const connection = yield* open
          state.current = connection
          yield* refresh(connection)
          return connection
        })
      }))

    const call = (definition: McpToolDefinition, input: unknown, context: Tool.Context) =>
      bounded(
        options,
        definition.name,
        Effect.gen(function*() {
          const first = state.current !== undefined && !isBroken(state.current) ?
            state.current :
            yield* Effect.mapError(reconnect(state.current), reconnectFailed)
          const result: CallToolResult = yield* invoke(first, definition.name, input, context).pipe(
            Effect.catchIf((failure) => failure.sessionExpired, () =>
              // the server no longer knows the session (404/410): the call never ran, so it is sent again
              Effect.flatMap(
                Effect.mapError(reconnect(first), reconnectFailed),
                (connection) => invoke(connection, definition.name, input, context)
              ))
          )
          return yield* toOutput(options.name, definition.name, result)
        })
      )

    state.current = yield* open
    yield* refresh(state.current)
    yield* followChanges(
      options.name,
      listChanged,
      () => state.current === undefined || isBroken(state.current) ? Effect.void : refresh(state.current)
    )

    return {
      name: options.name,
      tools: SubscriptionRef.get(tools),
      changes: SubscriptionRef.changes(tools),
      pid: Effect.sync(() => state.current?.process?.pid)
    } satisfies Server
  })

/** Takes the server's new tool list each time it announces one, for the life of the scope. */
const followChanges = (
  server: string,
  listChanged: Queue.Queue<void>,
  refresh: () => Effect.Effect<void, ReconnectError>
): Effect.Effect<unknown, never, Scope.Scope> =>
  Queue.take(listChanged).pipe(
    Effect.andThen(Effect.suspend(refresh)),
    Effect.catch((error) => Effect.logWarning(`MCP server "${server}": the new tool list was not taken`, error)),
    Effect.forever,
    Effect.forkScoped
  )

/**
 * A call, bounded: without a timeout of its own a call still has `defaults.callTimeout`, so a server
 * that never answers holds no run. Its failure is fed back to the model.
 */
const bounded = (
  options: ServerOptions,
  tool: string,
  body: Effect.Effect<Tool.Output, CallFailed | Errors.ToolExecutionFailed>
): Effect.Effect<Tool.Output, Errors.ToolExecutionFailed> => {
  const limited = configuredTimeout(options, tool) === undefined ?
    Effect.timeoutOrElse(body, {
      duration: defaults.callTimeout,
      orElse: () =>
        Effect.fail(
          new CallFailed(
            `no answer within ${
              Duration.format(defaults.callTimeout)
            } (the default bound of an MCP call; the server's toolTimeout changes it)`,
            false
          )
        )
    }) :
    body
  return Effect.mapError(limited, (error) =>
    error._tag === "CallFailed" ?
      new Errors.ToolExecutionFailed({
        description: `MCP server "${options.name}" failed the call of ${shown(tool)}: ${error.reason}`
      }) :
      error)
}

const reconnectFailed = (error: ReconnectError): Errors.ToolExecutionFailed =>
  new Errors.ToolExecutionFailed({
    description: `${error.message} (the connection was lost and starting a new one failed)`,
    details: error._tag === "McpInitializeTimeout" ?
      { _tag: error._tag, server: error.server, timeout: error.timeout } :
      { _tag: error._tag, server: error.server, reason: error.reason }
  })
