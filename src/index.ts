/**
 * effect-agent: an Effect-typed, functional agent runtime. Every public module, as a namespace.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Agent from "./Agent.js"

/** @since 0.1.0 */
export * as Compaction from "./Compaction.js"

/** @since 0.1.0 */
export * as Errors from "./Errors.js"

/** @since 0.1.0 */
export * as Event from "./Event.js"

/** @since 0.1.0 */
export * as Loop from "./Loop.js"

/** @since 0.1.0 */
export * as Message from "./Message.js"

/** @since 0.1.0 */
export * as Model from "./Model.js"

/** @since 0.1.0 */
export * as Tool from "./Tool.js"

/** @since 0.1.0 */
export * as Inbox from "./services/Inbox.js"

/** @since 0.1.0 */
export * as Permissions from "./services/Permissions.js"

/** @since 0.1.0 */
export * as Session from "./services/Session.js"

/** @since 0.1.0 */
export * as Workspace from "./services/Workspace.js"

/** @since 0.1.0 */
export * as Tools from "./tools/index.js"

/** @since 0.1.0 */
export * as Anthropic from "./providers/Anthropic.js"

/** @since 0.1.0 */
export * as OpenAiCompat from "./providers/OpenAiCompat.js"

/** @since 0.1.0 */
export * as OpenAiResponses from "./providers/OpenAiResponses.js"

/** @since 0.1.0 */
export * as Google from "./providers/Google.js"

/** @since 0.1.0 */
export * as Tracing from "./Tracing.js"
