import { describe, expect, it } from 'vitest';
import { extensionOfMimeType, mimeTypeOf, UNKNOWN_MEDIA_TYPE } from '../../src/core/media-types.js';

describe('the one table of media types', () => {
  it('types a file by its extension in any letter case, and an unknown one as octet-stream', () => {
    expect(
      ['chart.PNG', 'photo.jpeg', 'photo.jpg', 'data.json', 'feed.xml', 'song.flac', 'notes', 'x.exe'].map(mimeTypeOf),
    ).toEqual([
      'image/png',
      'image/jpeg',
      'image/jpeg',
      'application/json',
      'application/xml',
      'audio/flac',
      UNKNOWN_MEDIA_TYPE,
      UNKNOWN_MEDIA_TYPE,
    ]);
  });

  it('names a file of a type, aliases and parameters included, and leaves an unknown type without one', () => {
    expect(
      ['IMAGE/JPEG', 'audio/x-wav', 'audio/mp3', 'text/plain; charset=utf-8', 'video/x-unknown'].map(
        extensionOfMimeType,
      ),
    ).toEqual(['.jpg', '.wav', '.mp3', '.txt', undefined]);
  });

  it('gives a file saved by its type the same type back by its name', () => {
    for (const type of ['image/png', 'image/jpeg', 'audio/x-wav', 'audio/wave', 'application/pdf', 'text/csv']) {
      const extension = extensionOfMimeType(type);
      expect(extension).toBeDefined();
      expect(extensionOfMimeType(mimeTypeOf(`file${extension}`))).toBe(extension);
    }
  });
});
