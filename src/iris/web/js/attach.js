// @ts-check
// Files attached to the next message: picked with the attach button or pasted, shown as chips,
// sent as message.send's `attachments` ({kind, name, mime, data_b64}).
//
// Images are downscaled here (longer edge MAX_EDGE, JPEG unless they have transparency) so a
// phone photo fits the socket's 1 MiB frame; what still does not fit is refused here, with a
// line saying so, rather than closing the socket.

export const MAX_EDGE = 2048;
export const MAX_FILES = 8; // the server's limit for one message
// Base64 of every file of one message together: the frame's 1 MiB, less room for the text.
export const MAX_FRAME_B64 = 1_000_000 - 40_000;

/** @typedef {{kind: "image" | "audio" | "file", name: string, mime: string, data_b64: string}} SentFile */

/** @param {string} mime @returns {"image" | "audio" | "file"} */
export function kindOf(mime) {
  if (mime.startsWith("image/")) return "image";
  if (mime.startsWith("audio/")) return "audio";
  return "file";
}

/** @param {Blob} blob @returns {Promise<string>} */
async function base64Of(blob) {
  const bytes = new Uint8Array(await blob.arrayBuffer());
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** An image no larger than MAX_EDGE on its longer edge (the file itself when it is already).
 * @param {File} file @returns {Promise<Blob>} */
async function downscaled(file) {
  if (file.type === "image/gif" || file.type === "image/svg+xml") return file;
  let bitmap;
  try {
    bitmap = await createImageBitmap(file);
  } catch {
    return file; // not decodable here: the server says what it makes of it
  }
  const scale = Math.min(1, MAX_EDGE / Math.max(bitmap.width, bitmap.height));
  if (scale === 1 && file.size < 700_000) return file;
  const canvas = document.createElement("canvas");
  canvas.width = Math.max(1, Math.round(bitmap.width * scale));
  canvas.height = Math.max(1, Math.round(bitmap.height * scale));
  const context = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
  context.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  const type = file.type === "image/png" ? "image/png" : "image/jpeg";
  const blob = await new Promise((done) => canvas.toBlob(done, type, 0.85));
  return blob && (scale < 1 || blob.size < file.size) ? blob : file;
}

export class Attachments {
  /** @param {HTMLElement} list where the chips go */
  constructor(list) {
    this.list = list;
    /** @type {SentFile[]} */
    this.files = [];
    /** @type {string} */
    this.problem = "";
    /** @type {Promise<void>} */
    this.reading = Promise.resolve();
  }

  get count() { return this.files.length; }

  /** Read ``files`` (a FileList or pasted files) into the list. @param {Iterable<File>} files */
  add(files) {
    const picked = [...files];
    this.reading = this.reading.then(async () => {
      for (const file of picked) await this.addOne(file);
      this.render();
    });
    return this.reading;
  }

  /** @param {File} file */
  async addOne(file) {
    const name = file.name || "pasted";
    if (this.files.length >= MAX_FILES) {
      this.problem = `${name}: at most ${MAX_FILES} files a message`;
      return;
    }
    const kind = kindOf(file.type);
    const blob = kind === "image" ? await downscaled(file) : file;
    const used = this.files.reduce((sum, f) => sum + f.data_b64.length, 0);
    if (used + Math.ceil(blob.size / 3) * 4 > MAX_FRAME_B64) {
      this.problem = `${name}: too large to send (${Math.ceil(blob.size / 1024)} KB; a message carries about ${Math.floor(MAX_FRAME_B64 * 0.75 / 1024)} KB)`;
      return;
    }
    this.problem = "";
    const data = await base64Of(blob);
    this.files.push({ kind, name, mime: blob.type || file.type || "application/octet-stream", data_b64: data });
  }

  /** The files for message.send, once every one is read; the list empties. */
  async take() {
    await this.reading;
    const files = this.files;
    this.files = [];
    this.problem = "";
    this.render();
    return files;
  }

  /** Put back files whose message could not be sent. @param {SentFile[]} files */
  restore(files) {
    this.files = [...files, ...this.files];
    this.render();
  }

  render() {
    this.list.replaceChildren();
    this.files.forEach((file, index) => {
      const chip = document.createElement("span");
      chip.className = "chip";
      chip.textContent = file.name;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "×";
      remove.setAttribute("aria-label", `Remove ${file.name}`);
      remove.addEventListener("click", () => { this.files.splice(index, 1); this.render(); });
      chip.append(remove);
      this.list.append(chip);
    });
    if (this.problem) {
      const note = document.createElement("span");
      note.className = "chip problem";
      note.setAttribute("role", "alert");
      note.textContent = this.problem;
      this.list.append(note);
    }
    this.list.hidden = !this.files.length && !this.problem;
  }
}
