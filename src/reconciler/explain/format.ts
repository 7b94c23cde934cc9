/** Explanations for people: one line per decision or command, with its sequence and time. */
import type { Touch } from "./select.js";

export function formatTouches(subject: string, touches: readonly Touch[]): string {
  if (touches.length === 0) return `no decision touched ${subject}\n`;
  const seqWidth = Math.max(...touches.map((t) => String(t.seq).length));
  const kindWidth = Math.max(...touches.map((t) => t.kind.length));
  const indent = " ".repeat(seqWidth + 3);
  const lines = touches.map(
    (t) =>
      `#${String(t.seq).padStart(seqWidth)}  ${new Date(t.timeMs).toISOString()}  ${t.kind.padEnd(kindWidth)}  ${t.text}` +
      (t.detail ? `\n${t.detail.replace(/^/gm, indent)}` : ""),
  );
  return `${touches.length} decision(s) and command(s) touched ${subject}:\n${lines.join("\n")}\n`;
}
