// quotaplane's web page: the partition selector and the auto-refresh. The page is whole without it.
(function () {
  "use strict";
  var KEY = "quotaplane.refresh";
  var timer = null;
  var select = document.getElementById("refresh");
  var partition = document.getElementById("partition");
  var status = document.getElementById("status");

  if (partition) {
    partition.addEventListener("change", function () { partition.form.submit(); });
  }
  if (!select) { return; }

  function say(text) { if (status) { status.textContent = text; } }

  function schedule() {
    clearTimeout(timer);
    var seconds = parseInt(select.value, 10) || 0;
    if (seconds > 0) { timer = setTimeout(refresh, seconds * 1000); }
  }

  function refresh() {
    fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (r) {
        if (r.status === 401) {
          say("the session has ended: log in again");
          window.location.assign("/ui/login");
          return null;
        }
        return r.text();
      })
      .then(function (text) {
        if (text === null) { return; }
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.querySelector("main");
        var current = document.querySelector("main");
        // keep what the user is typing (the standing form) untouched
        if (fresh && current && !current.contains(document.activeElement)) { current.replaceWith(fresh); }
        var stamp = doc.getElementById("updated");
        var mine = document.getElementById("updated");
        if (stamp && mine) { mine.textContent = stamp.textContent; }
        say("");
        schedule();
      })
      .catch(function () { say("cannot reach the service; trying again"); schedule(); });
  }

  var saved = window.localStorage ? window.localStorage.getItem(KEY) : null;
  if (saved !== null && select.querySelector('option[value="' + saved + '"]')) { select.value = saved; }
  select.addEventListener("change", function () {
    if (window.localStorage) { window.localStorage.setItem(KEY, select.value); }
    schedule();
  });
  schedule();
}());
