/**
 * The cluster's settings for the durable tests' runners: `Durable.layerCluster`'s own (`Durable.takeover`:
 * shard locks refreshed every 3 seconds and expiring after 9 seconds, health checks every second,
 * assignments read every half second), so the tests see the takeover a deployment gets, and two that
 * only make the tests quicker: an entity whose shard moves is given 2 seconds to stop (5 in `Durable.takeover`),
 * and a send to a runner that is not there yet is tried again after 0.1 second. The runner processes
 * (`test/fixtures/durable-runner.ts`, through `Durable.layerCluster`) and the tests that are runners
 * themselves use the same ones.
 */
import * as Durable from "../../src/Durable.js"

/** What the tests' runners add to `Durable.layerCluster`'s settings. */
export const quickTests = {
  entityTerminationTimeout: "2 seconds",
  sendRetryInterval: "100 millis"
} as const

/** The whole settings of a test runner that builds its cluster layer itself. */
export const fastFailover = { ...Durable.takeover, ...quickTests } as const
