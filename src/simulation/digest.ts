/**
 * The digest of a run: FNV-1a (two 32-bit lanes) over every stored
 * message's sequence, subject, time and encoded event, in log order. Two
 * runs of one seed give the same digest; any difference in what was stored,
 * where or when changes it.
 */
export class Digest {
  #a = 0x811c9dc5;
  #b = 0x050c5d1f;

  bytes(data: Uint8Array): void {
    let a = this.#a;
    let b = this.#b;
    for (let i = 0; i < data.length; i++) {
      const x = data[i] as number;
      a = Math.imul(a ^ x, 0x01000193);
      b = Math.imul(b ^ x ^ (a >>> 24), 0x01000193);
    }
    this.#a = a >>> 0;
    this.#b = b >>> 0;
  }

  text(s: string): void {
    let a = this.#a;
    let b = this.#b;
    for (let i = 0; i < s.length; i++) {
      const x = s.charCodeAt(i);
      a = Math.imul(a ^ x, 0x01000193);
      b = Math.imul(b ^ x ^ (a >>> 24), 0x01000193);
    }
    this.#a = a >>> 0;
    this.#b = b >>> 0;
  }

  number(n: number): void {
    this.text(String(n));
  }

  /** 16 hex digits. */
  hex(): string {
    return this.#a.toString(16).padStart(8, "0") + this.#b.toString(16).padStart(8, "0");
  }
}
