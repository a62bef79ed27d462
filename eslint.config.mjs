import * as effectEslint from "@effect/eslint-plugin"
import tseslint from "typescript-eslint"

const boundedForEach = {
  selector: "CallExpression[callee.object.name='Effect'] > ObjectExpression > " +
    "Property[key.name='concurrency']:not([value.value='unbounded']):not([value.value=1])",
  message: "effect's bounded Effect.forEach can run an item twice and skip another (test/Concurrency.test.ts): " +
    "use \"unbounded\", 1, or forEachBounded from test/utils/concurrency.ts"
}

export default tseslint.config(
  { ignores: ["node_modules/**", "coverage/**", ".tmp/**", ".bench/**", "dist/**", "docs/**"] },
  ...tseslint.configs.recommended,
  ...effectEslint.configs.dprint,
  {
    rules: {
      "@effect/no-import-from-barrel-package": ["error", { packageNames: ["effect", "@effect/platform"] }],
      // effect 4.1.5's bounded `Effect.forEach` (and `Effect.all`, `Effect.partition`, … on it) can run an
      // item twice and skip another (test/Concurrency.test.ts): unbounded, or one at a time, or the tests'
      // `forEachBounded` (test/utils/concurrency.ts); the loop's tool calls have their own pool
      "no-restricted-syntax": ["error", boundedForEach],
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/no-empty-object-type": "off",
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }]
    }
  },
  {
    // the code every run and every model request goes through: V8 gives a generator function made anew at
    // each call (`Effect.gen(function*() {…})` inside a function) a map of its own, which young-generation
    // collections take for a root, so what it holds (a run, its history, a request's body) outlived it
    // until a full collection; these files call generator functions of the module instead
    files: [
      "src/Loop.ts",
      "src/internal/run.ts",
      "src/internal/toolBatch.ts",
      "src/internal/eventStream.ts",
      "src/internal/provider/request.ts"
    ],
    rules: {
      "no-restricted-syntax": ["error", boundedForEach, {
        selector: "CallExpression[callee.object.name='Effect'][callee.property.name='gen'] > " +
          "FunctionExpression[generator=true]",
        message: "a generator function made at each call outlives it until a full collection (eslint.config.mjs): " +
          "write Effect.gen(() => steps(args)) over a generator function of the module"
      }]
    }
  }
)
