import { defaultExclude, defineConfig } from "vitest/config"

// the durable tests start runner processes and databases: they run after the others, one file at a
// time, so they neither slow the other tests down nor each other
const durable = ["test/Durable*.test.ts"]

// the other slow files: they start the command, terminals, MCP servers, PostgreSQL or a browser, or run
// the compiler. `npm run test:unit` (`vitest run --project unit`) leaves them and the durable tests out
const slow = [
  "test/Cli*.test.ts",
  "test/Interactive.test.ts",
  "test/InteractiveTree.test.ts",
  "test/InteractiveApproval.test.ts",
  "test/TerminalOutput.test.ts",
  "test/PermissionsFile.test.ts",
  "test/Demo.test.ts",
  "test/Mcp*.test.ts",
  "test/SessionSql.test.ts",
  "test/SessionCrash.test.ts",
  "test/Export.test.ts",
  "test/Guides.test.ts",
  "test/Reaper.test.ts",
  "test/WebChat.test.ts"
]

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/**/*.test.ts"], exclude: [...defaultExclude, ...durable, ...slow] }
      },
      // a machine without what these tests drive (tmux, `script`, chromium) fails here, at the start
      { extends: true, test: { name: "slow", include: slow, globalSetup: ["test/setup/machine.ts"] } },
      {
        extends: true,
        test: {
          name: "durable",
          include: durable,
          pool: "forks",
          maxWorkers: 1,
          isolate: false,
          sequence: { groupOrder: 1 }
        }
      }
    ]
  }
})
