/**
 * GPU memory in the catalog file is written with a binary unit ("72GiB",
 * "512MiB") rather than a bare number of MiB: a bare number invites the
 * GB-versus-MiB mistakes that make a replica fit on paper and run out of
 * memory on the card.
 */

const UNITS: Record<string, number> = {
  mib: 1,
  mi: 1,
  gib: 1024,
  gi: 1024,
  tib: 1024 * 1024,
  ti: 1024 * 1024,
};
const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$/;

/** MiB for a memory size like "72GiB", or an error message naming what is wrong. */
export function parseMemory(text: string): { mb: number } | { error: string } {
  const m = PATTERN.exec(text);
  if (!m)
    return {
      error: `expected a size with a binary unit like "72GiB" or "512MiB", got ${JSON.stringify(text)}`,
    };
  const [, num, unit] = m as unknown as [string, string, string];
  const factor = UNITS[unit.toLowerCase()];
  if (factor === undefined) {
    const decimal = /^[kmgt]b?$/i.test(unit);
    return {
      error: decimal
        ? `unit ${JSON.stringify(unit)} is ambiguous; use a binary unit (MiB, GiB, TiB)`
        : `unknown unit ${JSON.stringify(unit)}; use MiB, GiB or TiB`,
    };
  }
  const mb = Number(num) * factor;
  if (!Number.isInteger(mb)) return { error: `${JSON.stringify(text)} is not a whole number of MiB` };
  if (mb <= 0) return { error: `memory must be positive, got ${JSON.stringify(text)}` };
  return { mb };
}

/** The catalog file's spelling of a size in MiB: GiB when whole, MiB otherwise. */
export function formatMemory(mb: number): string {
  return mb % 1024 === 0 ? `${mb / 1024}GiB` : `${mb}MiB`;
}
