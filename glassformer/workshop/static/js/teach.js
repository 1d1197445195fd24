// The teaching link's page (/teach): Copy puts the link on the clipboard; Back returns to the walk.
const link = document.getElementById("teach-link");
const said = document.getElementById("teach-copied");
link.addEventListener("focus", () => link.select());
document.getElementById("teach-copy").addEventListener("click", async () => {
  try {
    await navigator.clipboard.writeText(link.value);
    said.textContent = "copied";
  } catch {
    link.select(); // no clipboard here (an insecure context, a denied permission): selected to copy by hand
    said.textContent = "selected: press Ctrl+C";
  }
});
document.getElementById("teach-back").addEventListener("click", (event) => {
  event.preventDefault();
  history.back();
});
link.select();
