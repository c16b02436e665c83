// The Memories button shows this thread's memories at once. Chainlit's command buttons only select the
// command and wait for a message, so after the click (once React has rendered the selection) this types a
// short request into the composer and sends it.
(function () {
  "use strict";

  function sendMemoriesCommand() {
    const input = document.getElementById("chat-input");
    const submit = document.getElementById("chat-submit");
    if (!input || !submit || submit.disabled) {
      return;
    }
    input.focus();
    // insertText goes through the editor's own input events, so React's state holds the text.
    document.execCommand("selectAll", false);
    document.execCommand("insertText", false, "this thread");
    window.setTimeout(function () {
      submit.click();
    }, 0);
  }

  document.addEventListener(
    "click",
    function (event) {
      const target = event.target;
      if (!(target instanceof Element) || !target.closest("#command-Memories")) {
        return;
      }
      if (target.closest("#command-Memories").classList.contains("text-command")) {
        return; // the click unselects an already selected command
      }
      window.setTimeout(sendMemoriesCommand, 50);
    },
    true,
  );
})();
