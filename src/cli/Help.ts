/**
 * The command's `--help`: made from the command's own definition (its options, arguments and
 * subcommands, with their descriptions), so it cannot drift from what the command takes. An option
 * without a description of its own gets none (no placeholder paragraph), and the text has colours only
 * on a terminal without `NO_COLOR`.
 *
 * @since 0.1.0
 */
import type * as Command from "effect/cli/Command"
import * as Param from "effect/cli/Param"
import * as Primitive from "effect/cli/Primitive"
import * as Option from "effect/Option"
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
 * What a command's help is made of: its usage lines, its description, its options and arguments (the
 * record the command is made of) and its subcommands.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Page {
  readonly usage: ReadonlyArray<string>
  readonly description?: string | undefined
  readonly config: Command.Command.Config
  readonly subcommands?: ReadonlyArray<Command.Command.Any> | undefined
}

/**
 * The help of a command: `USAGE`, then its `DESCRIPTION`, `ARGUMENTS`, `OPTIONS` and `COMMANDS`, each
 * entry's head on a line of its own and its description indented under it.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const render = (
  page: Page,
  options: { readonly color: boolean; readonly width?: number | undefined }
): string => {
  const bold = (text: string) => options.color ? `\x1b[1m${text}\x1b[0m` : text
  const width = options.width ?? maxWidth
  const wrap = (text: string, indent: number) => wrapTo(text, indent, width)
  const entry = (head: string, description: Option.Option<string>): ReadonlyArray<string> => [
    head,
    ...Option.match(Option.filter(description, (text) => !placeholders.includes(text.trim())), {
      onNone: () => [],
      onSome: (text) => wrap(text, 2)
    }),
    ""
  ]
  const sections: Array<string> = []
  const section = (title: string, lines: ReadonlyArray<string>) => {
    const body = [...lines]
    while (body.at(-1) === "") body.pop()
    if (body.length > 0) sections.push([bold(title), "", ...body].join("\n"))
  }
  section("USAGE", page.usage.map((line) => `$ ${line}`))
  if (page.description !== undefined) section("DESCRIPTION", wrap(page.description, 0))
  const params = Object.values(page.config).flatMap(paramsOf)
  section(
    "ARGUMENTS",
    params.filter(({ single }) => single.kind === Param.argumentKind).flatMap(({ single, optional, variadic }) => {
      const name = `<${single.name}>${variadic ? "..." : ""}`
      return entry(bold(optional || variadic ? `[${name}]` : name), single.description)
    })
  )
  section(
    "OPTIONS",
    params.filter(({ single }) => single.kind === Param.flagKind).flatMap(({ single, variadic }) => {
      const names = [
        ...single.aliases.map((alias) => alias.length === 1 ? `-${alias}` : `--${alias}`),
        `--${single.name}`
      ]
      const value = single.primitiveType._tag === "Boolean"
        ? ""
        : ` <${single.typeName ?? Primitive.getTypeName(single.primitiveType)}>`
      // every option may be left out; one that may also be given again says so
      return entry(`${bold(names.join(", "))}${value}${variadic ? " (repeatable)" : ""}`, single.description)
    }).concat(
      page.subcommands === undefined ? [] : [
        ...entry(bold("-h, --help"), Option.some("this help; after a command's name, that command's")),
        ...entry(bold("-v, --version"), Option.some("the version of effect-agent"))
      ]
    )
  )
  const commands = page.subcommands ?? []
  const nameWidth = Math.max(0, ...commands.map((command) => command.name.length))
  // a description too long for the line goes on under itself, not under the names
  const hang = 4 + nameWidth + 2
  section(
    "COMMANDS",
    commands.flatMap((command) => {
      const [first = "", ...rest] = wrap(command.description ?? "", hang).map((line) => line.slice(hang))
      return [
        `  - ${bold(command.name.padEnd(nameWidth))}  ${first}`.trimEnd(),
        ...rest.map((line) => `${" ".repeat(hang)}${line}`)
      ]
    })
  )
  return `${sections.join("\n\n")}\n`
}

/**
 * The width the help is wrapped to: the terminal's (or `COLUMNS`'), at least 40 and at most 100
 * characters (longer lines are harder to read); 100 in a pipe.
 *
 * @since 0.2.0
 * @category Combinators
 */
export const widthFor = (
  stream: { readonly isTTY?: boolean | undefined; readonly columns?: number | undefined },
  environment: { readonly [name: string]: string | undefined }
): number => {
  const columns = stream.isTTY === true && (stream.columns ?? 0) > 0
    ? stream.columns!
    : Number.parseInt(environment.COLUMNS ?? "", 10)
  return Number.isFinite(columns) && columns > 0 ? Math.min(maxWidth, Math.max(minWidth, columns)) : maxWidth
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
 * Paragraphs that say nothing about an option or an argument: the help never shows them.
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

const maxWidth = 100
const minWidth = 40

interface Found {
  readonly single: Param.Single<Param.ParamKind, unknown>
  readonly optional: boolean
  readonly variadic: boolean
}

/** The options and arguments of a command's record, each with whether it may be left out or repeated. */
const paramsOf = (value: Command.Command.Config[PropertyKey]): ReadonlyArray<Found> => {
  if (Param.isParam(value)) return singlesOf(value, { optional: false, variadic: false })
  return (Array.isArray(value) ? value : Object.values(value)).flatMap(paramsOf)
}

const singlesOf = (
  param: Param.Param<Param.ParamKind, unknown>,
  found: { readonly optional: boolean; readonly variadic: boolean }
): ReadonlyArray<Found> => {
  if (Param.isSingle(param)) return param.hidden ? [] : [{ single: param, ...found }]
  if (!("param" in param) || !Param.isParam(param.param)) return []
  return singlesOf(param.param, {
    optional: found.optional || param._tag === "Optional",
    variadic: found.variadic || param._tag === "Variadic"
  })
}

/** A paragraph in lines of at most `width` characters (a longer word has a line of its own), indented. */
const wrapTo = (text: string, indent: number, width: number): ReadonlyArray<string> => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(/\s+/).filter((word) => word !== "")) {
    if (line !== "" && indent + line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else line = line === "" ? word : `${line} ${word}`
  }
  if (line !== "") lines.push(line)
  return lines.map((line) => `${" ".repeat(indent)}${line}`)
}
