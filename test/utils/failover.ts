/**
 * The cluster's settings for the durable tests' runners: a dead runner's shard locks expire after 4
 * seconds (refreshed every second) and runners look at their assignments every half second, so a test
 * sees a failover in seconds (the default lock expiration is 35 seconds). The runner processes
 * (`test/fixtures/durable-runner.ts`) and the tests that are runners themselves use the same ones.
 */
export const fastFailover = {
  entityMessagePollInterval: "300 millis",
  shardLockRefreshInterval: "1 second",
  shardLockExpiration: "4 seconds",
  refreshAssignmentsInterval: "500 millis",
  runnerHealthCheckInterval: "1 second",
  entityTerminationTimeout: "2 seconds",
  sendRetryInterval: "100 millis"
} as const
