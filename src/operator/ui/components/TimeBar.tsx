/** The time slider over the log: drag, step event by event, play, or follow the live end. */
import { positionLabel } from "../model.ts";

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
      <input
        id="slider"
        type="range"
        min={0}
        max={p.lastSeq}
        value={p.seq}
        aria-label="position in the log"
        onInput={(e) => p.onSeek(Number((e.currentTarget as HTMLInputElement).value))}
      />
      <span class="pos" data-testid="position">
        {positionLabel(p.seq, p.timeMs, p.lastSeq)}
      </span>
      <button type="button" class={p.live ? "live on" : "live"} onClick={p.onLive} data-testid="live">
        ● live
      </button>
    </div>
  );
}
