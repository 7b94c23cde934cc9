/**
 * The request side of one agent stream: an async iterable fed by push().
 * One outbox per stream serializes everything the agent says on it.
 */
export class Outbox<T> implements AsyncIterable<T> {
  private readonly queue: T[] = [];
  private waiting: ((r: IteratorResult<T>) => void) | undefined;
  private closed = false;

  /** Items pushed but not yet taken by the transport. */
  get pending(): number {
    return this.queue.length;
  }

  push(item: T): boolean {
    if (this.closed) return false;
    const w = this.waiting;
    if (w) {
      this.waiting = undefined;
      w({ value: item, done: false });
    } else {
      this.queue.push(item);
    }
    return true;
  }

  close(): void {
    this.closed = true;
    const w = this.waiting;
    this.waiting = undefined;
    w?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const item = this.queue.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiting = resolve;
        });
      },
      return: () => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
      // The transport throws into the request iterable when the call fails; nothing more will be read.
      throw: (err?: unknown) => {
        this.close();
        return Promise.reject(err);
      },
    };
  }
}
