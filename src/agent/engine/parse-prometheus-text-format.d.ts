// The parser ships no types: what src/agent/engine/load.ts uses of it.
declare module "parse-prometheus-text-format" {
  interface Sample {
    value?: string;
    labels?: Record<string, string>;
    timestamp_ms?: string;
  }
  interface MetricFamily {
    name: string;
    help: string;
    type: string;
    metrics: Sample[];
  }
  export default function parsePrometheusTextFormat(text: string): MetricFamily[];
}
