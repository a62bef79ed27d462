/**
 * Tracing: the loop's spans (`Loop.run`, `Loop.turn`, `Loop.model`, `Loop.tool`) carry the
 * OpenTelemetry GenAI semantic-convention attributes, made only when the application provides a
 * tracer (for example with `@effect/opentelemetry`). Message content is recorded only when the
 * application opts in with `layerRecordContent`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"

/**
 * Whether the model spans record the messages sent and received (`gen_ai.input.messages`,
 * `gen_ai.output.messages`, `gen_ai.system_instructions`). Off by default: messages may hold secrets
 * and personal data.
 *
 * @since 0.1.0
 * @category Models
 */
export const RecordContent: Context.Reference<boolean> = Context.Reference<boolean>(
  "effect-agent/Tracing/RecordContent",
  { defaultValue: () => false }
)

/**
 * Opts in to recording message content on the model spans.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerRecordContent: Layer.Layer<never> = Layer.succeed(RecordContent, true)
