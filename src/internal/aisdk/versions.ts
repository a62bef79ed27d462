/**
 * The specification versions the adapter drives (`LanguageModelV4`, and the previous `LanguageModelV3`):
 * which versions there are, the check that a model is one of them, and the one place their prompts
 * differ, how file data is written.
 *
 * @internal
 */
import type { LanguageModelV4 } from "@ai-sdk/provider"
import * as Effect from "effect/Effect"
import * as Errors from "../../Errors.js"

/** A specification version the adapter drives. */
export type Version = "v4" | "v3"

/** The versions, newest first. */
export const supported: ReadonlyArray<Version> = ["v4", "v3"]

/** The version of a language model, or `ModelConfigInvalid` saying what it got and what is supported. */
export const check = (model: unknown, name: string | undefined): Effect.Effect<Version, Errors.ModelConfigInvalid> => {
  const m = model as Partial<LanguageModelV4> | null | undefined
  const provider = name ?? (typeof m?.provider === "string" ? m.provider : "ai-sdk")
  if (typeof model === "string") {
    return Effect.fail(
      new Errors.ModelConfigInvalid({
        provider,
        description: `${JSON.stringify(model)} is a model id, not a language model: pass a provider's model ` +
          `object, such as openai("gpt-5") from @ai-sdk/openai`
      })
    )
  }
  if (typeof m !== "object" || m === null || typeof m.doStream !== "function") {
    return Effect.fail(
      new Errors.ModelConfigInvalid({
        provider,
        description: `expected an AI SDK language model (an object with specificationVersion and doStream), ` +
          `got ${m === null ? "null" : typeof m}`
      })
    )
  }
  const version = m.specificationVersion as unknown
  if (version === "v4" || version === "v3") return Effect.succeed(version)
  return Effect.fail(
    new Errors.ModelConfigInvalid({
      provider,
      description: `the language model ${m.modelId ?? ""} implements specification version ` +
        `${JSON.stringify(version)}, and effect-agent/AiSdk supports ${
          supported.map((v) => JSON.stringify(v)).join(" and ")
        } ` +
        `(ai 7 and @ai-sdk/* 4.x implement "v4"; ai 6 and @ai-sdk/* 3.x "v3"): update the provider package`
    })
  )
}

/** An image as a prompt's file part: V3 takes the data itself, V4 a tagged `{ type: "data" }`. */
export const filePart = (mimeType: string, data: string, version: Version) =>
  version === "v3"
    ? { type: "file" as const, mediaType: mimeType, data: data as any }
    : { type: "file" as const, mediaType: mimeType, data: { type: "data" as const, data } }

/** An image in a tool result's content output: V3 has `image-data`, V4 a file part. */
export const outputImage = (mimeType: string, data: string, version: Version) =>
  version === "v3"
    ? { type: "image-data", data, mediaType: mimeType }
    : { type: "file", mediaType: mimeType, data: { type: "data", data } }
