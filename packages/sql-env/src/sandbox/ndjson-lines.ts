/**
 * Splits a stream of UTF-8 text chunks (a stream with setEncoding('utf8'), so
 * no character is split across chunks) into '\n'-terminated lines. Partial
 * lines are kept as a list of pieces and joined once, so a multi-megabyte
 * frame arriving in 64 KiB chunks costs one copy, not one per chunk.
 */
export class NdjsonLines {
  private pieces: string[] = [];

  push(chunk: string, onLine: (line: string) => void): void {
    let start = 0;
    for (let end = chunk.indexOf('\n'); end !== -1; end = chunk.indexOf('\n', start)) {
      let line = chunk.slice(start, end);
      if (this.pieces.length > 0) {
        this.pieces.push(line);
        line = this.pieces.join('');
        this.pieces = [];
      }
      start = end + 1;
      onLine(line);
    }
    if (start < chunk.length) this.pieces.push(chunk.slice(start));
  }
}
