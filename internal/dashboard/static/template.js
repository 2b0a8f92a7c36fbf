// A template's page while its build runs: look again every two seconds
// until the daemon says it is ready or failed (the page then has no
// data-building and loads no script).
const state = document.getElementById("template-state");
if (state && state.dataset.building) {
  setTimeout(() => location.reload(), 2000);
}
