/**
 * Engine output made safe to show: it is whatever an engine (or a forged
 * agent) printed, and goes to terminals and web pages. Terminal escape
 * sequences (colours, cursor moves, title changes) are removed, and every
 * other control character but tab and line feed becomes U+FFFD; bytes that
 * are not UTF-8 were already U+FFFD when decoded.
 */
// CSI (ESC [ … final), OSC (ESC ] … BEL or ESC \), and two-character ESC sequences.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

export function printable(text: string): string {
  return text.replace(ESCAPES, "").replace(/\r\n/g, "\n").replace(CONTROLS, "\uFFFD");
}
