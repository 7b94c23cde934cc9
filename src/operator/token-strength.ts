/**
 * Whether a bearer token is strong enough to guard the API: long, and not
 * made of a few characters or repeats (a guessable token gives its role to
 * whoever guesses it). The estimate counts the token's own character
 * frequencies (Shannon entropy times length), so it refuses `aaaa…`; a
 * token that repeats a shorter one (`abcdefghij` three times and more) is
 * refused as well. Random tokens of the length pass: 32 hex digits
 * (`openssl rand -hex 16`, about 110 bits by this count, rarely under 90),
 * base64, or `llmgw api new-token` (43 base64url characters).
 */

/** The shortest token taken. */
export const MIN_TOKEN_LENGTH = 32;
/**
 * Fewest different characters in a token. Low enough that random hex
 * passes: 32 random hex digits have 9 or fewer different ones about once in
 * 13,000 tokens, and 7 or fewer less than once in a million; the entropy
 * estimate below is what refuses a token of few characters.
 */
export const MIN_TOKEN_DISTINCT = 6;
/** Least estimated entropy, in bits. */
export const MIN_TOKEN_BITS = 80;

/** The rule, as error messages state it. */
export const TOKEN_RULE = `a token needs at least ${MIN_TOKEN_LENGTH} characters, ${MIN_TOKEN_DISTINCT} of them different, must not repeat a shorter one, and needs an estimated ${MIN_TOKEN_BITS} bits of entropy; make one with \`llmgw api new-token\` or \`openssl rand -base64 32\``;

/** Estimated entropy of `token` in bits, from its own character frequencies. */
export function tokenEntropyBits(token: string): number {
  const chars = [...token];
  const counts = new Map<string, number>();
  for (const c of chars) counts.set(c, (counts.get(c) ?? 0) + 1);
  let perChar = 0;
  for (const n of counts.values()) {
    const p = n / chars.length;
    perChar -= p * Math.log2(p);
  }
  return perChar * chars.length;
}

/** Why `token` is too weak to use, or undefined when it is strong enough. */
export function weakTokenReason(token: string): string | undefined {
  const chars = [...token];
  if (chars.length < MIN_TOKEN_LENGTH) return `it has ${chars.length} characters: ${TOKEN_RULE}`;
  const distinct = new Set(chars).size;
  if (distinct < MIN_TOKEN_DISTINCT) return `it has only ${distinct} different characters: ${TOKEN_RULE}`;
  const period = repeatPeriod(chars);
  if (period !== undefined) return `it repeats the same ${period} characters: ${TOKEN_RULE}`;
  const bits = tokenEntropyBits(token);
  if (bits < MIN_TOKEN_BITS) return `its estimated entropy is ${Math.floor(bits)} bits: ${TOKEN_RULE}`;
  return undefined;
}

/** The length of the shorter token `chars` repeats (at least twice over), if it does. */
function repeatPeriod(chars: readonly string[]): number | undefined {
  for (let p = 1; p * 2 <= chars.length; p++) {
    let repeats = true;
    for (let i = p; i < chars.length && repeats; i++) repeats = chars[i] === chars[i - p];
    if (repeats) return p;
  }
  return undefined;
}
