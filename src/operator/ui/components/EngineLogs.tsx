/** A replica's engine output (`llmgw logs --follow`), shown on demand: the Logs button on the replica. */
import { useEffect, useRef, useState } from "preact/hooks";
import type { Api } from "../api.ts";

/** What the page keeps of the output: the newest this many characters. */
const KEEP_CHARS = 200_000;

export function EngineLogs({ api, replicaId }: { api: Api; replicaId: string }) {
  const [open, setOpen] = useState(false);
  const [text, setText] = useState("");
  const [status, setStatus] = useState("");
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    if (!open) return;
    const stop = new AbortController();
    setText("");
    setStatus("following…");
    api
      .engineLogs(
        replicaId,
        200,
        {
          text: (t) => setText((old) => (old + t).slice(-KEEP_CHARS)),
          end: (e) =>
            setStatus(e.end === "done" ? "ended" : `ended (${e.end})${e.error ? `: ${e.error}` : ""}`),
        },
        stop.signal,
      )
      .catch((err: Error) => {
        if (!stop.signal.aborted) setStatus(err.message);
      });
    return () => stop.abort();
  }, [api, replicaId, open]);
  useEffect(() => {
    const el = pre.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [text]);
  return (
    <div class="engine-logs" data-testid="engine-logs">
      <button type="button" data-testid="logs-button" onClick={() => setOpen(!open)}>
        {open ? "Hide logs" : "Logs"}
      </button>
      {open && (
        <>
          <span class="muted" data-testid="logs-status">
            {" "}
            {status}
          </span>
          <pre class="output logs" ref={pre} data-testid="logs-output">
            {text}
          </pre>
        </>
      )}
    </div>
  );
}
