/** The time slider over the log: drag, step event by event, play, or follow the live end. */
import { markLeft, positionLabel, type ScaleMark } from "../model.ts";

interface Props {
  seq: number;
  lastSeq: number;
  timeMs: number;
  live: boolean;
  playing: boolean;
  onSeek(seq: number): void;
  onStep(delta: number): void;
  onPlay(): void;
  onLive(): void;
  /** Jump to the last event at or before a time (ISO 8601, or anything the browser's Date reads). */
  onTime(time: string): void;
  /** Autoscale decisions, marked under the slider (▲ up, ▼ down); a click moves there. */
  marks: ScaleMark[];
}

export function TimeBar(p: Props) {
  return (
    <div class="timebar">
      <button type="button" onClick={() => p.onStep(-1)} title="one event back" data-testid="step-back">
        ◀
      </button>
      <button
        type="button"
        onClick={p.onPlay}
        title={p.playing ? "pause" : "play from here"}
        data-testid="play"
      >
        {p.playing ? "❚❚" : "▶"}
      </button>
      <button type="button" onClick={() => p.onStep(1)} title="one event forward" data-testid="step-forward">
        ▶|
      </button>
      <div class="track">
        <input
          id="slider"
          type="range"
          min={0}
          max={p.lastSeq}
          value={p.seq}
          aria-label="position in the log"
          onInput={(e) => p.onSeek(Number((e.currentTarget as HTMLInputElement).value))}
        />
        <div class="scale-marks" data-testid="scale-marks">
          {p.marks.map((m) => (
            <button
              type="button"
              key={`${m.seq}-${m.model}`}
              class={m.to > m.from ? "mark up" : "mark down"}
              style={{ left: `${markLeft(m.seq, p.lastSeq)}%` }}
              title={`#${m.seq} ${m.explanation}`}
              onClick={() => p.onSeek(m.seq)}
            >
              {m.to > m.from ? "▲" : "▼"}
            </button>
          ))}
        </div>
      </div>
      <span class="pos" data-testid="position">
        {positionLabel(p.seq, p.timeMs, p.lastSeq)}
      </span>
      <input
        class="time"
        placeholder="go to time, e.g. 2026-12-01T10:00Z"
        aria-label="go to time"
        data-testid="go-to-time"
        onKeyDown={(e) => {
          const v = (e.currentTarget as HTMLInputElement).value.trim();
          if (e.key === "Enter" && v) p.onTime(v);
        }}
      />
      <button type="button" class={p.live ? "live on" : "live"} onClick={p.onLive} data-testid="live">
        ● live
      </button>
    </div>
  );
}
