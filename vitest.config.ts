import { defaultExclude, defineConfig } from "vitest/config"

// the durable tests start runner processes and databases: they run after the others, one file at a
// time, so they neither slow the other tests down nor each other
const durable = ["test/Durable*.test.ts"]

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/**/*.test.ts"], exclude: [...defaultExclude, ...durable] }
      },
      {
        extends: true,
        test: {
          name: "durable",
          include: durable,
          pool: "forks",
          poolOptions: { forks: { singleFork: true } },
          sequence: { groupOrder: 1 }
        }
      }
    ]
  }
})
