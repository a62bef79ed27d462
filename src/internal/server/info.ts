/**
 * What `GET /info` tells a client about the server: its model, its workspace, the agent's tools and the
 * permission rules in force, each rule in the words of a permissions file (`bash(npm test)`), so a web
 * page can say what the agent can do before the first prompt.
 */
import type * as Permissions from "../../services/Permissions.js"

/** A tool as a client shows it. */
export interface ToolInfo {
  readonly name: string
  readonly description: string
}

/** The rules in force, each as a permissions file writes it; `otherwise` decides a call no rule matches. */
export interface RulesInfo {
  readonly allow: ReadonlyArray<string>
  readonly ask: ReadonlyArray<string>
  readonly deny: ReadonlyArray<string>
  readonly otherwise: "allow" | "deny" | "ask"
}

/** The rules as a client shows them. */
export const rulesInfo = (rules: Permissions.Rules): RulesInfo => ({
  allow: (rules.allow ?? []).map(ruleText),
  ask: (rules.ask ?? []).map(ruleText),
  deny: (rules.deny ?? []).map(ruleText),
  otherwise: rules.otherwise ?? ((rules.allow ?? []).length > 0 ? "deny" : "allow")
})

/** A rule as a permissions file writes it: `bash(npm test)`, `write_file(src/**)`, `read_file`, `*`. */
export const ruleText = (rule: Permissions.Rule): string => {
  const tools = rule.tools ?? ["*"]
  const patterns = [...(rule.commands ?? []), ...(rule.paths ?? [])]
  return patterns.length === 0
    ? tools.join(", ")
    : tools.flatMap((tool) => patterns.map((pattern) => `${tool}(${pattern})`)).join(", ")
}
