// The one heatmap painter: a rows x cols array onto a canvas, one canvas pixel per cell (CSS
// scales it up), so a 512 x 512 map costs one ImageData, not 262,144 rectangles. The
// workshop's heatmaps and attention overviews and the notebooks' model view all paint so.

/** Fill ``canvas`` (width cols, height rows) with one pixel per value: colour(value) -> [r, g, b]. */
export function paint(canvas, values, colour) {
  const image = new ImageData(canvas.width, canvas.height);
  for (let i = 0; i < values.length; i += 1) {
    const [r, g, b] = colour(values[i]);
    image.data[4 * i] = r;
    image.data[4 * i + 1] = g;
    image.data[4 * i + 2] = b;
    image.data[4 * i + 3] = 255;
  }
  canvas.getContext("2d").putImageData(image, 0, 0);
}
