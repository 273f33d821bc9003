/**
 * The part of autocannon 8 (no bundled types) this benchmark uses.
 *
 * @module
 */
declare module 'autocannon' {
  export interface Histogram {
    average: number;
    p50: number;
    p90: number;
    p99: number;
    max: number;
  }
  export interface Result {
    latency: Histogram;
    requests: Histogram & { total: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  }
  export interface Options {
    url: string;
    connections?: number;
    duration?: number;
    headers?: Record<string, string>;
    tlsOptions?: { ca?: string };
  }
  export default function autocannon(options: Options): Promise<Result>;
}
