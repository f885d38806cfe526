/**
 * Per-call families counted on the call's path in plain maps and arrays, and
 * handed to prom-client's registries when scraped: the API's and MCP's calls
 * (`hostd_api_requests_total`, `hostd_api_request_duration_seconds`) and
 * forwarded calls (`hostd_forwarded_calls_total`,
 * `hostd_forwarded_call_duration_seconds`).
 * prom-client's own `inc` and `observe` validate and hash the label object on
 * every call (about 1.4 µs per request in a tight loop, more in the daemon:
 * docs/performance.md, "API"); here a call is three map lookups and a bucket
 * search, and the labels are made once per series at scrape time.
 */
import client from 'prom-client';

/** One series' figures (an operation's, or a peer's). */
interface OpTally {
  /** Calls by transport (empty when the family has none), then by HTTP status. */
  calls: Map<string, Map<number, number>>;
  /** Durations per bucket (not cumulative): one per upper bound, then +Inf. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

export class RequestTally {
  private readonly ops = new Map<string, OpTally>();

  /** `series`: the label the histogram is by (operation, peer); `transport`: the counter's transport label, if it has one. */
  constructor(
    readonly bounds: readonly number[],
    private readonly series = 'operation',
    private readonly transport: string | null = 'transport',
  ) {}

  note(operation: string, transport: string, status: number, seconds: number): void {
    let t = this.ops.get(operation);
    if (t === undefined) {
      t = { calls: new Map(), buckets: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
      this.ops.set(operation, t);
    }
    let byStatus = t.calls.get(transport);
    if (byStatus === undefined) {
      byStatus = new Map();
      t.calls.set(transport, byStatus);
    }
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    // The first bucket whose upper bound is at least the value, as prom-client counts it.
    const b = this.bounds;
    let i = 0;
    while (i < b.length && seconds > b[i]) i++;
    t.buckets[i]++;
    t.sum += seconds;
    t.count++;
  }

  reset(): void {
    this.ops.clear();
  }

  /** A counter family (the series label, the transport label if any, `status`) that reads the calls when scraped. */
  counter(name: string, help: string, registers: client.Registry[]): client.Counter<string> {
    const { ops, series, transport: transportLabel } = this;
    return new client.Counter({
      name,
      help,
      labelNames: transportLabel ? [series, transportLabel, 'status'] : [series, 'status'],
      registers,
      collect() {
        this.reset();
        for (const [key, t] of ops) {
          for (const [transport, byStatus] of t.calls) {
            for (const [status, n] of byStatus) {
              const labels: Record<string, string> = { [series]: key };
              if (transportLabel) labels[transportLabel] = transport;
              labels.status = String(status);
              this.inc(labels, n);
            }
          }
        }
      },
    });
  }

  /**
   * A histogram family (`operation`) registered as a metric of its own: it
   * answers the registries' `get()` with the series prom-client's Histogram
   * would give for the same observations (cumulative `_bucket` by `le`, then
   * `+Inf`, `_sum`, `_count`), so the exposition is prom-client's formatting.
   */
  histogram(name: string, help: string, registers: client.Registry[]): void {
    const tally = this;
    const metric = {
      name,
      help,
      type: 'histogram' as const,
      aggregator: 'sum' as const,
      labelNames: [tally.series],
      async get() {
        const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
        const series = tally.series;
        for (const [key, t] of tally.ops) {
          let acc = 0;
          tally.bounds.forEach((le, i) => {
            acc += t.buckets[i];
            values.push({ labels: { le, [series]: key }, value: acc, metricName: `${name}_bucket` });
          });
          values.push({ labels: { le: '+Inf', [series]: key }, value: t.count, metricName: `${name}_bucket` });
          values.push({ labels: { [series]: key }, value: t.sum, metricName: `${name}_sum` });
          values.push({ labels: { [series]: key }, value: t.count, metricName: `${name}_count` });
        }
        return { name, help, type: 'histogram', values, aggregator: 'sum' };
      },
      reset() {
        tally.reset();
      },
    };
    for (const r of registers) r.registerMetric(metric as unknown as client.Metric);
  }
}
