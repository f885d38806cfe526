/**
 * The metric families the daemon keeps itself (requests, tasks, the proxy
 * lease) and the registries they are exposed from. Labels are bounded: an
 * operation name from the registry, a transport, a status code, a task kind,
 * a state. Never a path, a token or a request id.
 *
 * Two registries hold the same families: prom-client renders one format per
 * registry (Prometheus text 0.0.4, OpenMetrics 1.0).
 */
import client from 'prom-client';
import { RequestTally } from './request-tally.js';

/** Seconds: from a fast read (1 ms) to a slow boot or download (30 min). */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const TASK_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800];

/**
 * How often the event-loop delay histogram (`hostd_nodejs_eventloop_lag_*`)
 * samples the loop. prom-client's 10 ms default wakes an idle daemon 100
 * times a second, a third of its CPU at rest on our machines
 * (docs/performance.md, "At rest"); at 100 ms a stall of 100 ms or more is
 * still always seen, a shorter one in proportion to its length.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

export class Families {
  readonly text = new client.Registry();
  readonly open = openMetricsRegistry();
  private readonly both = [this.text, this.open] as client.Registry[];

  /** Every API and MCP call, counted on its path and read by the two families below when scraped. */
  readonly requestTally = new RequestTally(REQUEST_BUCKETS);
  readonly requests = this.requestTally.counter(
    'hostd_api_requests_total',
    'API calls answered, by operation (none: no operation matched), transport and HTTP status.',
    this.both,
  );
  readonly tasksStarted = new client.Counter({
    name: 'hostd_tasks_started_total',
    help: 'Background tasks started on this member, by kind.',
    labelNames: ['kind'] as const,
    registers: this.both,
  });
  readonly tasksEnded = new client.Counter({
    name: 'hostd_tasks_ended_total',
    help: 'Background tasks ended on this member, by kind and final state (succeeded, failed).',
    labelNames: ['kind', 'state'] as const,
    registers: this.both,
  });
  readonly tasksActive = new client.Gauge({
    name: 'hostd_tasks_active',
    help: 'Background tasks queued or running on this member now, by kind.',
    labelNames: ['kind'] as const,
    registers: this.both,
  });
  readonly taskSeconds = new client.Histogram({
    name: 'hostd_task_duration_seconds',
    help: "Time from a task's start to its end, by kind.",
    labelNames: ['kind'] as const,
    buckets: TASK_BUCKETS,
    registers: this.both,
  });
  readonly readsLate = new client.Counter({
    name: 'hostd_metrics_reads_late_total',
    help: 'Scrapes that stopped waiting for a runtime read (they served the last figures, or none), by source.',
    labelNames: ['source'] as const,
    registers: this.both,
  });
  readonly holderChanges = new client.Counter({
    name: 'hostd_proxy_holder_changes_total',
    help: 'Changes of the proxy holder (moves, takeovers, a lost lease) seen by this member.',
    registers: this.both,
  });

  constructor() {
    this.requestTally.histogram('hostd_api_request_duration_seconds', "Time from a request's arrival to its answer, by operation.", this.both);
    // The daemon's own process: CPU, memory, event-loop lag, handles, GC.
    for (const register of this.both) {
      client.collectDefaultMetrics({ register, prefix: 'hostd_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
      // Gauges that prom-client names like counters (and promtool refuses); their `hostd_nodejs_active_*` twins stay.
      for (const name of ['handles', 'requests', 'resources']) register.removeSingleMetric(`hostd_nodejs_active_${name}_total`);
    }
  }

  /** A gauge whose value is read at scrape time (`collect`), in both registries. */
  gauge<L extends string>(name: string, help: string, labelNames: readonly L[], collect: (g: client.Gauge<L>) => Promise<void> | void): client.Gauge<L> {
    return new client.Gauge<L>({
      name,
      help,
      labelNames,
      registers: this.both,
      async collect() {
        await collect(this);
      },
    });
  }
}

export function openMetricsRegistry(): client.Registry {
  const r = new client.Registry();
  // The constructor takes the type too, but its declaration does not say so.
  (r as unknown as client.Registry<client.OpenMetricsContentType>).setContentType(client.Registry.OPENMETRICS_CONTENT_TYPE);
  return r;
}
