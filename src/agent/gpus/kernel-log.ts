/**
 * Reads what the kernel logged since the last read: `/dev/kmsg` (a character
 * device that hands out one record per read and keeps a position per open
 * file), or a regular file such as a copy of `dmesg` (read from the last
 * offset, from the start again when it shrank). The agent looks here for
 * Xid errors; a kernel log it cannot open is one warning and no Xids, not a
 * failed agent.
 */
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync } from "node:fs";

export interface KernelLog {
  /** The text logged since the last call ("" when nothing new or unreadable). */
  readNew(): string;
  close(): void;
}

export interface KernelLogOptions {
  path: string;
  /** Told once when the log cannot be opened or read, with the reason. */
  onUnreadable: (reason: string) => void;
}

const RECORD_BYTES = 8192; // /dev/kmsg refuses (EINVAL) a buffer smaller than a record

export function openKernelLog(o: KernelLogOptions): KernelLog {
  let fd: number | undefined;
  let device = false;
  let offset = 0;
  let partial = "";
  let told = false;
  const unreadable = (err: unknown) => {
    if (!told) o.onUnreadable((err as NodeJS.ErrnoException).code ?? String(err));
    told = true;
  };
  const open = (): boolean => {
    if (fd !== undefined) return true;
    try {
      fd = openSync(o.path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
      device = fstatSync(fd).isCharacterDevice();
      return true;
    } catch (err) {
      unreadable(err);
      return false;
    }
  };
  const buf = Buffer.alloc(RECORD_BYTES);
  const readDevice = (): string => {
    let out = "";
    for (let i = 0; i < 100_000; i++) {
      let n: number;
      try {
        n = readSync(fd!, buf, 0, buf.length, null);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EAGAIN") break; // nothing more for now
        if (code === "EPIPE") continue; // records were overwritten before we read them; go on with the next
        unreadable(err);
        break;
      }
      if (n === 0) break;
      out += buf.toString("utf8", 0, n);
    }
    return out;
  };
  const readFile = (): string => {
    const size = fstatSync(fd!).size;
    if (size < offset) {
      offset = 0; // rotated or truncated: what is there now is new
      partial = "";
    }
    let out = "";
    while (offset < size) {
      const n = readSync(fd!, buf, 0, Math.min(buf.length, size - offset), offset);
      if (n === 0) break;
      offset += n;
      out += buf.toString("utf8", 0, n);
    }
    // A line being written is read whole next time.
    const text = partial + out;
    const cut = text.lastIndexOf("\n") + 1;
    partial = text.slice(cut);
    return text.slice(0, cut);
  };
  return {
    readNew() {
      if (!open()) return "";
      try {
        return device ? readDevice() : readFile();
      } catch (err) {
        unreadable(err);
        return "";
      }
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}
