/**
 * The cluster's settings for the durable tests that are runners themselves: a dead runner's shard locks
 * expire after 4 seconds (refreshed every second) and runners look at their assignments every half
 * second, so a test sees a failover in seconds (the cluster's default lock expiration is 35 seconds).
 * The runner processes (`test/fixtures/durable-runner.ts`) take `Durable.layerCluster`'s takeover
 * settings, and the others of these.
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
