/** Re-run placement over a range of the history with another policy or limits; differing decisions are listed and highlighted on the map. */
import { useState } from "preact/hooks";
import type { Api } from "../api.ts";
import type { WhatIfResult } from "../types.ts";

interface Props {
  api: Api;
  lastSeq: number;
  result: WhatIfResult | null;
  onResult(r: WhatIfResult | null): void;
  onSeek(seq: number): void;
}

export function WhatIfPanel({ api, lastSeq, result, onResult, onSeek }: Props) {
  const [policy, setPolicy] = useState("spread");
  const [maxDecisions, setMaxDecisions] = useState("");
  const [suspectAfter, setSuspectAfter] = useState("");
  const [from, setFrom] = useState("1");
  const [to, setTo] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const run = async () => {
    setBusy(true);
    setError("");
    try {
      const config: Record<string, unknown> = { policy };
      if (maxDecisions) config["maxDecisionsPerPass"] = Number(maxDecisions);
      if (suspectAfter) config["suspectAfterMs"] = Number(suspectAfter) * 1000;
      const body = {
        config,
        ...(from ? { fromSeq: Number(from) } : {}),
        ...(to ? { toSeq: Number(to) } : {}),
      };
      onResult(await api.whatIf(body));
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section data-testid="what-if">
      <div class="form">
        <label>
          policy{" "}
          <select
            value={policy}
            onChange={(e) => setPolicy((e.currentTarget as HTMLSelectElement).value)}
            name="policy"
          >
            <option value="binpack">binpack</option>
            <option value="spread">spread</option>
          </select>
        </label>
        <NumberField
          label="max decisions per pass"
          size={6}
          value={maxDecisions}
          placeholder="500"
          onInput={setMaxDecisions}
        />
        <NumberField
          label="suspect after (s)"
          size={6}
          value={suspectAfter}
          placeholder="30"
          onInput={setSuspectAfter}
        />
        <NumberField label="from #" size={7} value={from} onInput={setFrom} />
        <NumberField label="to #" size={7} value={to} placeholder={String(lastSeq)} onInput={setTo} />
        <button type="button" onClick={run} disabled={busy} data-testid="run-what-if">
          {busy ? "running…" : "run"}
        </button>
        {result && (
          <button type="button" onClick={() => onResult(null)}>
            clear
          </button>
        )}
      </div>
      {error && <p class="error">{error}</p>}
      {result && (
        <div data-testid="what-if-result">
          <p>
            {result.compared} pass(es) compared, <strong>{result.differing}</strong> would differ. Nodes
            involved are outlined on the map.
          </p>
          <ol class="diffs">
            {result.passes.map((p) => (
              <li key={p.seq}>
                <button type="button" class="link" onClick={() => onSeek(p.seq)}>
                  #{p.seq}
                </button>
                <ul>
                  {p.differences.map((d) => (
                    <li key={d.subject} class="difference">
                      <strong>{d.subject}</strong>: <span class="record">{d.record}</span> →{" "}
                      <span class="alternative">{d.alternative}</span>
                    </li>
                  ))}
                </ul>
              </li>
            ))}
          </ol>
        </div>
      )}
    </section>
  );
}

/** A labelled numeric input. */
function NumberField(p: {
  label: string;
  size: number;
  value: string;
  placeholder?: string;
  onInput(value: string): void;
}) {
  return (
    <label>
      {p.label}{" "}
      <input
        inputMode="numeric"
        size={p.size}
        value={p.value}
        placeholder={p.placeholder}
        onInput={(e) => p.onInput((e.currentTarget as HTMLInputElement).value)}
      />
    </label>
  );
}
