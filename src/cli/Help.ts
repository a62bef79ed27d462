/**
 * The command's `--help`: made from the command's own definition (its options, arguments and
 * subcommands, with their descriptions), so it cannot drift from what the command takes. @effect/cli's
 * placeholders ("A user-defined piece of text.") are left out, a repeatable option reads as optional,
 * and the text has colours only on a terminal without `NO_COLOR`.
 *
 * @since 0.1.0
 */
import * as CliConfig from "effect/cli/CliConfig"
import * as Command from "effect/cli/Command"
import * as HelpDoc from "effect/cli/HelpDoc"
import type * as Span from "effect/cli/HelpDoc"
import * as HelpFlag from "./HelpFlag.js"

/**
 * Whether the arguments ask for help (`--help` or `-h` before a `--`), and for which subcommand.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const requested = (
  args: ReadonlyArray<string>,
  subcommands: ReadonlyArray<string>
): { readonly subcommand: string | undefined } | undefined => {
  if (!HelpFlag.asked(args)) return undefined
  return { subcommand: subcommands.includes(args[0] ?? "") ? args[0] : undefined }
}

/**
 * The help of a command: `usage` lines, then its description, arguments, options and subcommands as
 * @effect/cli describes them, without its placeholder paragraphs.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const render = <Name extends string, R, E, A>(
  command: Command.Command<Name, R, E, A>,
  options: { readonly usage: ReadonlyArray<string>; readonly color: boolean }
): string => {
  const doc = HelpDoc.blocks([
    HelpDoc.h1("USAGE"),
    ...options.usage.map((line) => HelpDoc.p(`$ ${line}`)),
    clean(Command.getHelp(command, CliConfig.defaultConfig))
  ])
  const text = HelpDoc.toAnsiText(doc)
  return options.color ? text : text.replace(/\x1b\[[0-9;]*m/g, "")
}

/**
 * Whether the help gets colours: stdout is a terminal and `NO_COLOR` is not set (https://no-color.org).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const colorFor = (
  stream: { readonly isTTY?: boolean | undefined },
  environment: { readonly [name: string]: string | undefined }
): boolean => stream.isTTY === true && (environment.NO_COLOR ?? "") === ""

/**
 * The paragraphs @effect/cli adds to every option and argument that say nothing about it.
 *
 * @since 0.1.0
 * @category Models
 */
export const placeholders: ReadonlyArray<string> = [
  "A user-defined piece of text.",
  "A true or false value.",
  "This setting is optional."
]

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Highlight":
    case "Strong":
    case "Weak":
      return spanText(span.value)
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
  }
}

const clean = (doc: HelpDoc.HelpDoc): HelpDoc.HelpDoc => {
  switch (doc._tag) {
    case "Paragraph":
      return placeholders.includes(spanText(doc.value).trim()) ? HelpDoc.empty : doc
    case "Sequence":
      return HelpDoc.sequence(clean(doc.left), clean(doc.right))
    case "DescriptionList":
      return HelpDoc.descriptionList(
        doc.definitions.map(([span, inner]) => [span, clean(inner)] as [Span.Span, HelpDoc.HelpDoc]) as [
          [Span.Span, HelpDoc.HelpDoc],
          ...Array<[Span.Span, HelpDoc.HelpDoc]>
        ]
      )
    case "Enumeration":
      return HelpDoc.enumeration(
        doc.elements.map(clean) as [HelpDoc.HelpDoc, ...Array<HelpDoc.HelpDoc>]
      )
    default:
      return doc
  }
}
